"""Is the object there? The presence check before an image is scored (GenColorBench §3.4).

The paper asks a VQA model "Is there a {object} in the image?" for every object of the prompt
and scores an image only when all are present; images failing the check are counted, not
scored. Two checks are offered:

- the default, needing no extra model: GroundingDINO's detection score of the object's best box
  (found anyway to mask it) at or above ``PRESENCE_THRESHOLD`` = 0.35, the detector's published
  box threshold (:data:`evaluation.models.segmentation.BOX_THRESHOLD`);
- :class:`VqaPresence`: any transformers image-text-to-text model (a hub id or a local folder,
  loaded by :func:`load_vqa`), asked :data:`QUESTION`; an answer starting with "yes" is present.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.models.segmentation import BOX_THRESHOLD, Segmentation
from storage.shown import shown

PRESENCE_THRESHOLD = BOX_THRESHOLD
QUESTION = "Is there a {object} in the image? Answer yes or no."


@dataclass(frozen=True)
class Presence:
    """The verdict of a presence check.

    Attributes
    ----------
    present : bool
    score : float or None
        The detection score in [0, 1] (detection check), else None.
    answer : str or None
        The VQA model's answer (VQA check), else None.
    """

    present: bool
    score: float | None = None
    answer: str | None = None


def presence_from_detection(segmentation: Segmentation, threshold: float = PRESENCE_THRESHOLD) -> Presence:
    """Present when the object's best box scored at least `threshold` (in [0, 1]).

    Raises
    ------
    ValueError
        If `threshold` is outside [0, 1].
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"`threshold` must be in [0, 1], got {threshold}")
    if segmentation.score is None:
        return Presence(present=False)
    return Presence(present=segmentation.score >= threshold, score=segmentation.score)


@dataclass(frozen=True)
class VqaPresence:
    """A transformers image-text-to-text model asked whether an object is in an image.

    Attributes
    ----------
    model : transformers model
        An ``AutoModelForImageTextToText`` in eval mode on `device`.
    processor : transformers processor
        Its ``AutoProcessor`` (with a chat template).
    device : str
    question : str
        With an ``{object}`` field.
    max_new_tokens : int
        Tokens generated for the answer (greedy).
    """

    model: Any
    processor: Any
    device: str
    question: str = QUESTION
    max_new_tokens: int = 4

    def __call__(self, image: np.ndarray, noun: str) -> Presence:
        """Ask about `noun` in `image` ((H, W, 3) uint8 sRGB); present when the answer starts with yes."""
        import torch
        from PIL import Image

        # 1. Check inputs.
        if not isinstance(noun, str) or not noun.strip():
            raise ValueError(f"`noun` must be a non-empty string, got {shown(noun)}")
        if not isinstance(image, np.ndarray) or image.ndim != 3 or image.dtype != np.uint8:
            raise ValueError(
                f"`image` must be an (H, W, 3) uint8 array, got {shown(getattr(image, 'shape', image))}"
            )

        # 2. The question in the model's chat template.
        messages = [
            {
                "role": "user",
                "content": [{"type": "image"}, {"type": "text", "text": self.question.format(object=noun)}],
            }
        ]
        text = self.processor.apply_chat_template(messages, add_generation_prompt=True)
        inputs = self.processor(images=[Image.fromarray(image)], text=text, return_tensors="pt").to(
            self.device
        )

        # 3. Greedy answer.
        with torch.inference_mode():
            out = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False)
        answer = self.processor.batch_decode(
            out[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True
        )[0]
        return Presence(present=answer.strip().lower().startswith("yes"), answer=answer.strip())


def load_vqa(source: str | Path, *, device: str, dtype: Any = None) -> VqaPresence:
    """Load an image-text-to-text model (hub id or local folder) as a presence check.

    Offline by the project's settings: a hub id must already be in the local cache.
    """
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    dtype = torch.float32 if dtype is None else dtype
    model = AutoModelForImageTextToText.from_pretrained(str(source), dtype=dtype).to(device).eval()
    return VqaPresence(model=model, processor=AutoProcessor.from_pretrained(str(source)), device=str(device))
