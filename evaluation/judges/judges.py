"""Color judges: each looks at a probe item and decides about descriptions of it.

A judge is called as ``judge(item, texts) -> Verdicts`` and has a ``name`` and a ``chance``
(the pair-wise accuracy of guessing):

* `YesNoJudge`: an image-text-to-text model asked, per description, the Rainbow paper's
  question; it accepts when the next-token logit of *yes* beats that of *no*. Its tuples
  are independent yes/no decisions: chance 0.25.
* `ContrastiveJudge`: a CLIP-like model scoring image-text similarity; a pair is right
  when the match outscores the foil (a forced choice): chance 0.5.
* `PixelJudge`: the reference: measures each object's color from its pixels
  (`evaluation.judges.probes.region_color`, named by `evaluation.color.naming`) and
  accepts a description when every color it mentions is its object's. Chance 0.25.
* `RandomJudge`: accepts each description with probability 1/2; the chance baseline.

Models load by hub id or local path through ``from_pretrained``; the caller picks device
and dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evaluation.color.naming import name_srgb
from evaluation.judges.foils import color_mentions
from evaluation.judges.probes import ProbeItem, region_color
from storage.shown import shown

#: Judge specifications of `load_judge`: the kind, then ``:MODEL`` for the model judges.
JUDGE_KINDS = ("pixel", "random", "contrastive", "yesno")
#: The Rainbow paper's prompt for LLaVA (section 5.3).
YES_NO_PROMPT = (
    "Does the following sentence match this image?\n{description}\nPlease answer with either 'yes' or 'no'."
)


@dataclass(frozen=True)
class Verdicts:
    """A judge's verdicts on the texts of one item, in the order given.

    Attributes
    ----------
    scores : ndarray, shape (k,), float64
        Higher means the judge finds the text a better description.
    accepted : ndarray, shape (k,), bool, or None
        Yes/no decisions; None for a contrastive judge (it only ranks).
    """

    scores: np.ndarray
    accepted: np.ndarray | None


class PixelJudge:
    """The reference judge: reads each object's color from its pixels.

    A mention is bound to the region whose noun (its first word) follows the color word, or
    to the only region of a one-object item; a description with an unbound mention is
    rejected.
    """

    name = "pixel"
    chance = 0.25

    def __call__(self, item: ProbeItem, texts: Sequence[str]) -> Verdicts:
        measured = {
            r.noun.split()[0].lower(): str(name_srgb(region_color(item.image, r.mask)).basic)
            for r in item.regions
        }
        only = next(iter(measured.values())) if len(measured) == 1 else None
        accepted = np.array(
            [all(measured.get(m.noun, only) == m.term for m in color_mentions(text)) for text in texts],
            dtype=bool,
        )
        return Verdicts(accepted.astype(np.float64), accepted)


class RandomJudge:
    """Accepts each description with probability 1/2, drawn from `rng`."""

    name = "random"
    chance = 0.25

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def __call__(self, item: ProbeItem, texts: Sequence[str]) -> Verdicts:
        scores = self.rng.random(len(texts))
        return Verdicts(scores, scores < 0.5)


class ContrastiveJudge:
    """A CLIP-like model: image-text logits, the match must outscore the foil.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A model whose output has ``logits_per_image`` (CLIP, SigLIP, ...).
    processor : transformers.ProcessorMixin
        Its processor (``processor(text=..., images=..., return_tensors="pt")``).
    name : str
    device : str
    """

    chance = 0.5

    def __init__(self, model, processor, *, name: str, device: str = "cpu") -> None:
        self.model, self.processor, self.name, self.device = model.eval(), processor, name, device

    @classmethod
    def from_pretrained(
        cls, model_id: str, *, device: str = "cpu", dtype=None, name: str | None = None
    ) -> ContrastiveJudge:
        """Load ``AutoModel`` and ``AutoProcessor`` from a hub id or a local folder.

        ``name`` defaults to `model_id`; ``dtype`` is a ``torch.dtype`` (None: the checkpoint's).
        """
        from transformers import AutoModel, AutoProcessor

        model = AutoModel.from_pretrained(model_id, dtype=dtype).to(device)
        return cls(model, AutoProcessor.from_pretrained(model_id), name=name or str(model_id), device=device)

    def __call__(self, item: ProbeItem, texts: Sequence[str]) -> Verdicts:
        import torch

        inputs = self.processor(
            text=list(texts), images=[item.image], return_tensors="pt", padding=True, truncation=True
        ).to(self.device, dtype=self.model.dtype)
        with torch.inference_mode():
            logits = self.model(**inputs).logits_per_image[0]
        return Verdicts(logits.float().cpu().numpy().astype(np.float64), None)


class YesNoJudge:
    """An image-text-to-text model asked whether each description matches the image.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A model whose output has next-token ``logits`` (LLaVA and other
        ``AutoModelForImageTextToText`` models).
    processor : transformers.ProcessorMixin
        Its processor, with a chat template.
    name : str
    device : str
    prompt : str
        The question, with ``{description}`` where the description goes.
    answers : tuple of (str, str)
        The words read as yes and as no; their first tokens' logits are compared.
    """

    chance = 0.25

    def __init__(
        self,
        model,
        processor,
        *,
        name: str,
        device: str = "cpu",
        prompt: str = YES_NO_PROMPT,
        answers=("yes", "no"),
    ) -> None:
        if "{description}" not in prompt:
            raise ValueError(f"`prompt` must contain '{{description}}', got {shown(prompt)}")
        self.model, self.processor, self.name, self.device, self.prompt = (
            model.eval(),
            processor,
            name,
            device,
            prompt,
        )
        tokenizer = processor.tokenizer
        self.answer_ids = [tokenizer.encode(word, add_special_tokens=False)[0] for word in answers]

    @classmethod
    def from_pretrained(
        cls, model_id: str, *, device: str = "cpu", dtype=None, name: str | None = None, **options
    ) -> YesNoJudge:
        """Load ``AutoModelForImageTextToText`` and ``AutoProcessor`` from a hub id or folder.

        ``name`` defaults to `model_id`; ``options`` go to the constructor (``prompt``,
        ``answers``).
        """
        from transformers import AutoModelForImageTextToText, AutoProcessor

        model = AutoModelForImageTextToText.from_pretrained(model_id, dtype=dtype).to(device)
        processor = AutoProcessor.from_pretrained(model_id)
        return cls(model, processor, name=name or str(model_id), device=device, **options)

    def __call__(self, item: ProbeItem, texts: Sequence[str]) -> Verdicts:
        import torch

        margins = []
        for text in texts:
            question = self.prompt.format(description=text)
            messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
            prompt = self.processor.apply_chat_template(messages, add_generation_prompt=True)
            inputs = self.processor(images=[item.image], text=[prompt], return_tensors="pt").to(
                self.device, dtype=self.model.dtype
            )
            with torch.inference_mode():
                last = self.model(**inputs).logits[0, -1].float()
            margins.append(float(last[self.answer_ids[0]] - last[self.answer_ids[1]]))
        scores = np.array(margins, dtype=np.float64)
        return Verdicts(scores, scores > 0)


def parse_judge(spec: str) -> tuple[str, str]:
    """``"contrastive:openai/clip"`` -> ``("contrastive", "openai/clip")``; ``"pixel"`` -> ``("pixel", "")``.

    Raises
    ------
    ValueError
        If the kind is not one of `JUDGE_KINDS`, a model judge names no model, or pixel
        or random names one.
    """
    kind, _, model = str(spec).strip().partition(":")
    if kind not in JUDGE_KINDS:
        raise ValueError(f"judge {shown(spec)} must start with one of {', '.join(JUDGE_KINDS)}")
    if (kind in ("contrastive", "yesno")) != bool(model):
        raise ValueError(
            f"judge {shown(spec)}: contrastive and yesno take :MODEL, pixel and random take nothing"
        )
    return kind, model


def load_judge(
    spec: str, *, rng: np.random.Generator, device: str = "cpu", dtype=None, source: str | None = None
):
    """The judge a specification names (`parse_judge`), loaded; model judges are named `spec`.

    Parameters
    ----------
    spec : str
        ``pixel``, ``random``, ``contrastive:MODEL`` or ``yesno:MODEL`` (hub id or folder).
    rng : numpy.random.Generator
        The random judge's draws.
    device : str
    dtype : torch.dtype, optional
        Model weights' dtype (None: the checkpoint's).
    source : str, optional
        Load a model judge from here (a hub id or folder) instead of the spec's MODEL.
    """
    kind, model = parse_judge(spec)
    if kind == "pixel":
        return PixelJudge()
    if kind == "random":
        return RandomJudge(rng)
    loader = ContrastiveJudge if kind == "contrastive" else YesNoJudge
    return loader.from_pretrained(source or model, device=device, dtype=dtype, name=f"{kind}:{model}")
