"""The VQA presence check on a tiny image-text-to-text model built here (LLaVA, random weights)."""

import numpy as np
import pytest

from evaluation.explicit.presence import QUESTION, Presence, VqaPresence, load_vqa
from evaluation.explicit.rules import SCORINGS
from evaluation.pipeline import runs
from tests.evaluation.explicit.test_cli import _explicit, models  # noqa: F401  (the module's tiny models)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WORDS = ["<unk>", "<s>", "</s>", "<pad>", "<image>", "USER:", "ASSISTANT:", *QUESTION.split(), "car", "apple"]


def build_tiny_vqa(path, answer: str):
    """A LLaVA of a few thousand random weights whose greedy answer is always `answer`.

    Its output layer is zero, so every token ties and greedy decoding takes token 0: `answer`.
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    words = [answer, *[w for w in WORDS if w != answer]]
    vocab = {word: index for index, word in enumerate(words)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    text = LlamaConfig(
        vocab_size=len(words),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=vocab["<s>"],
        eos_token_id=vocab["</s>"],
        pad_token_id=vocab["<pad>"],
    )
    vision = CLIPVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=vocab["<image>"],
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(config).eval()
    model.lm_head.weight.data.zero_()
    template = (
        "{% for m in messages %}USER: {% for c in m['content'] %}{% if c['type'] == 'image' %}<image> "
        "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endfor %}{% if add_generation_prompt %} ASSISTANT:{% endif %}"
    )
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=template,
    )
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def vqa_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("vqa")
    return {answer: build_tiny_vqa(root / answer, answer) for answer in ("yes", "no")}


def test_a_vqa_model_loads_by_folder_and_its_yes_means_present(vqa_models):
    image = np.zeros((40, 50, 3), dtype=np.uint8)
    yes = load_vqa(vqa_models["yes"], device="cpu")
    no = load_vqa(vqa_models["no"], device="cpu")
    assert isinstance(yes, VqaPresence) and yes.question == QUESTION
    assert yes(image, "car") == Presence(present=True, answer="yes yes yes yes")
    assert no(image, "car") == Presence(present=False, answer="no no no no")


@pytest.mark.parametrize(
    ("image", "noun", "field"),
    [(np.zeros((4, 4, 3), np.uint8), " ", "`noun`"), (np.zeros((4, 4), np.uint8), "car", "`image`")],
)
def test_vqa_bad_input_raises_value_error(vqa_models, image, noun, field):
    with pytest.raises(ValueError, match=field):
        load_vqa(vqa_models["yes"], device="cpu")(image, noun)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_images_a_vqa_model_calls_absent_are_counted_not_scored(tmp_path, models, vqa_models, capsys):  # noqa: F811
    assert _explicit(tmp_path, models, "--presence", str(vqa_models["no"])) == 0
    printed = capsys.readouterr().out
    assert "4 new image(s) judged; 4 in run 'x'" in printed
    results = runs.explicit_results(runs.connect(tmp_path / "db.sqlite"), run="x")
    assert len(results) == 6 * len(SCORINGS) and {r["present"] for r in results} == {0}  # 6 objects
    assert {r["presence_answer"] for r in results} == {"no no no no"}
    assert all(r["correct"] is None and r["delta_e00"] is None for r in results)
    coverage = [line.split() for line in printed.splitlines() if line.startswith("tiny-random")]
    assert coverage[0] == ["tiny-random", "4", "0", "4", "0"]
