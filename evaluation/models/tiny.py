"""Tiny models with random weights, built and saved by the project itself.

They exercise the real loading and inference code of diffusers and transformers on a CPU in
seconds, with no download: a Stable Diffusion pipeline (``tiny-random`` in the registry), a
GroundingDINO detector and a SAM model. Their tokenizers' vocabularies are written here.
Their outputs are meaningless; they are for tests, benchmarks and offline demos only.

Each builder writes into a temporary sibling directory and renames it into place, so a
directory that exists is complete.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from evaluation.color.naming import BASIC_TERMS
from evaluation.color.synthetic import SHAPES

#: Side of the square images the tiny models are built for, in pixels.
TINY_RESOLUTION = 64
_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789"


def _build_atomically(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Run `write(tmp_dir)` and move the result to `path`; return `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    try:
        write(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


@contextmanager
def one_cpu_thread() -> Iterator[None]:
    """Run torch on one CPU thread inside the block, then restore the thread count.

    Tiny models gain nothing from intra-op threads, and on a shared, loaded CPU the
    waiting threads of a tiny workload can slow it down tens of times.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def write_clip_vocab(directory: Path, *, max_length: int = 77) -> int:
    """Write a character-level CLIP BPE vocabulary (vocab.json, merges.txt, config).

    Every byte of the byte-level alphabet is a token, alone and word-final (``</w>``), and
    there are no merges, so any text tokenizes without unknown tokens.

    Returns
    -------
    int
        The vocabulary size.
    """
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = sorted(ByteLevel.alphabet())
    tokens = alphabet + [c + "</w>" for c in alphabet] + ["<|startoftext|>", "<|endoftext|>"]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    config = {"model_max_length": max_length, "tokenizer_class": "CLIPTokenizer"}
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return len(tokens)


def write_bert_vocab(directory: Path) -> int:
    """Write a character-level WordPiece vocabulary (vocab.txt); returns its size."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "-", "'"]
    tokens += list(_LETTERS) + ["##" + c for c in _LETTERS]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    (directory / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}), encoding="utf-8"
    )
    return len(tokens)


def _tiny_sd_components(tmp: Path, seed: int) -> dict:
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    vocab_size = write_clip_vocab(tmp / "_vocab")
    tokenizer = CLIPTokenizer.from_pretrained(tmp / "_vocab")
    torch.manual_seed(seed)
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=vocab_size,
            hidden_size=32,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=2,
            max_position_embeddings=77,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    )
    unet = UNet2DConditionModel(
        sample_size=TINY_RESOLUTION // 8,
        in_channels=4,
        out_channels=4,
        block_out_channels=(32, 64),
        layers_per_block=1,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
        norm_num_groups=8,
    )
    # Four VAE levels give the usual 8x latent downsampling.
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        block_out_channels=(8, 16, 16, 16),
        layers_per_block=1,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        latent_channels=4,
        norm_num_groups=8,
        sample_size=TINY_RESOLUTION,
    )
    scheduler = DDIMScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    return dict(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet, scheduler=scheduler)


def build_tiny_pipeline(path: str | Path, *, seed: int = 0) -> Path:
    """Build and save a tiny random-weight ``StableDiffusionPipeline``.

    Parameters
    ----------
    path : str or Path
        Directory to create (replaced if present); load it back with
        ``StableDiffusionPipeline.from_pretrained(path)``.
    seed : int
        Seeds the weight initialisation: the same seed gives the same weights.

    Returns
    -------
    Path
        `path`. The pipeline makes 64x64 images; its UNet has about 0.2M parameters.
    """
    from diffusers import StableDiffusionPipeline

    def write(tmp: Path) -> None:
        components = _tiny_sd_components(tmp, seed)
        pipe = StableDiffusionPipeline(
            **components, safety_checker=None, feature_extractor=None, requires_safety_checker=False
        )
        pipe.save_pretrained(tmp)
        shutil.rmtree(tmp / "_vocab")

    return _build_atomically(path, write)


def build_tiny_grounding_dino(path: str | Path, *, seed: int = 0) -> Path:
    """Build and save a tiny random-weight GroundingDINO with its processor.

    Loads back through ``AutoModelForZeroShotObjectDetection.from_pretrained(path)`` and
    ``AutoProcessor.from_pretrained(path)``. Swin backbone and BERT text encoder are a few
    thousand parameters each; images are resized to 64x64.
    """
    import torch
    from transformers import (
        BertConfig,
        BertTokenizer,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessor,
        GroundingDinoProcessor,
        SwinConfig,
    )

    def write(tmp: Path) -> None:
        vocab_size = write_bert_vocab(tmp / "_vocab")
        tokenizer = BertTokenizer.from_pretrained(tmp / "_vocab")
        backbone = SwinConfig(
            image_size=TINY_RESOLUTION,
            patch_size=4,
            embed_dim=8,
            depths=[1, 1, 1, 1],
            num_heads=[1, 1, 1, 1],
            window_size=4,
            out_features=["stage2", "stage3", "stage4"],
        )
        text = BertConfig(
            vocab_size=vocab_size,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=16,
            max_position_embeddings=64,
        )
        # d_model must be a multiple of 32 (GroupNorm(32, d_model)); two decoder layers are
        # the fewest that transformers' box-head weight tying accepts.
        config = GroundingDinoConfig(
            backbone_config=backbone,
            text_config=text,
            d_model=32,
            encoder_layers=1,
            decoder_layers=2,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=16,
            decoder_ffn_dim=16,
            num_queries=10,
            num_feature_levels=3,
            encoder_n_points=2,
            decoder_n_points=2,
            max_text_len=32,
            use_timm_backbone=False,
            use_pretrained_backbone=False,
        )
        torch.manual_seed(seed)
        GroundingDinoForObjectDetection(config).save_pretrained(tmp)
        size = {"shortest_edge": TINY_RESOLUTION, "longest_edge": TINY_RESOLUTION}
        processor = GroundingDinoProcessor(
            image_processor=GroundingDinoImageProcessor(size=size), tokenizer=tokenizer
        )
        processor.save_pretrained(tmp)
        shutil.rmtree(tmp / "_vocab")

    return _build_atomically(path, write)


def tiny_sam_config() -> transformers.SamConfig:  # noqa: F821
    """A SAM configuration of about 17k parameters for 64x64 inputs."""
    from transformers import SamConfig, SamMaskDecoderConfig, SamPromptEncoderConfig, SamVisionConfig

    # initializer_range 0.02 (the default is 1e-10) so that random masks are not all empty.
    vision = SamVisionConfig(
        hidden_size=16,
        output_channels=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=TINY_RESOLUTION,
        patch_size=8,
        mlp_dim=32,
        global_attn_indexes=[0],
        window_size=4,
        num_pos_feats=8,
        initializer_range=0.02,
    )
    prompt = SamPromptEncoderConfig(
        hidden_size=16, image_size=TINY_RESOLUTION, patch_size=8, mask_input_channels=4
    )
    decoder = SamMaskDecoderConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, mlp_dim=32, iou_head_hidden_dim=16
    )
    return SamConfig(
        vision_config=vision,
        prompt_encoder_config=prompt,
        mask_decoder_config=decoder,
        initializer_range=0.02,
    )


def build_tiny_sam(path: str | Path, *, seed: int = 0) -> Path:
    """Build and save a tiny random-weight transformers ``SamModel`` with its processor.

    Loads back through ``SamModel.from_pretrained(path)`` and ``SamProcessor.from_pretrained(path)``.
    """
    import torch
    from transformers import SamImageProcessor, SamModel, SamProcessor

    def write(tmp: Path) -> None:
        torch.manual_seed(seed)
        SamModel(tiny_sam_config()).save_pretrained(tmp)
        image_processor = SamImageProcessor(
            size={"longest_edge": TINY_RESOLUTION},
            pad_size={"height": TINY_RESOLUTION, "width": TINY_RESOLUTION},
        )
        SamProcessor(image_processor=image_processor).save_pretrained(tmp)

    return _build_atomically(path, write)


def tiny_segment_anything_model(*, seed: int = 0) -> segment_anything.modeling.Sam:  # noqa: F821
    """A tiny random-weight model of the ``segment-anything`` package (64x64 inputs).

    The package only builds its published architectures (ViT-B/L/H) from a ``.pth``
    checkpoint; this assembles the same classes at toy size so that the second SAM backend
    can run on a CPU.
    """
    import torch
    from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer

    torch.manual_seed(seed)
    dim, patch = 16, 8
    encoder = ImageEncoderViT(
        img_size=TINY_RESOLUTION,
        patch_size=patch,
        embed_dim=dim,
        depth=1,
        num_heads=2,
        out_chans=dim,
        window_size=4,
        global_attn_indexes=(0,),
        use_rel_pos=True,
    )
    grid = TINY_RESOLUTION // patch
    prompt = PromptEncoder(
        embed_dim=dim,
        image_embedding_size=(grid, grid),
        input_image_size=(TINY_RESOLUTION, TINY_RESOLUTION),
        mask_in_chans=4,
    )
    decoder = MaskDecoder(
        transformer_dim=dim,
        transformer=TwoWayTransformer(depth=1, embedding_dim=dim, mlp_dim=32, num_heads=2),
        num_multimask_outputs=3,
        iou_head_hidden_dim=16,
    )
    return Sam(image_encoder=encoder, prompt_encoder=prompt, mask_decoder=decoder).eval()


#: The folders `build_all` builds under a models folder (``python -m evaluation build-tiny``).
BUILT_BY_BUILD_TINY = ("tiny-random", "tiny-grounding-dino", "tiny-sam")


def build_all(models_dir: str | Path, *, seed: int = 0) -> dict[str, Path]:
    """Build the tiny pipeline, detector and SAM under `models_dir` (`BUILT_BY_BUILD_TINY`);
    return their paths."""
    models_dir = Path(models_dir)
    builders = (build_tiny_pipeline, build_tiny_grounding_dino, build_tiny_sam)
    return {
        name: build(models_dir / name, seed=seed)
        for name, build in zip(BUILT_BY_BUILD_TINY, builders, strict=True)
    }


#: Words of the tiny image-text-to-text model's vocabulary besides its special tokens: the
#: judge audit's prompt and descriptions (other words map to ``<unk>``).
_VLM_PROMPT_WORDS = (
    "yes no does the following sentence match this image ? please answer with either ' or . , a an and"
)
TINY_VLM_WORDS = (*_VLM_PROMPT_WORDS.split(), *BASIC_TERMS, *SHAPES, "user", "assistant", ":")
_VLM_SPECIALS = ("<pad>", "<unk>", "<s>", "</s>", "<image>")
_VLM_CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {% for c in m['content'] %}{% if c['type'] == 'image' %}"
    "<image> {% else %}{{ c['text'] }}{% endif %}{% endfor %} {% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def _tiny_clip_image_processor():
    from transformers import CLIPImageProcessor

    side = TINY_RESOLUTION // 2
    return CLIPImageProcessor(size={"shortest_edge": side}, crop_size={"height": side, "width": side})


def build_tiny_clip(path: str | Path, *, seed: int = 0) -> Path:
    """Build and save a tiny random-weight ``CLIPModel`` with its processor (32x32 inputs).

    Loads back through ``AutoModel.from_pretrained(path)`` and
    ``AutoProcessor.from_pretrained(path)``; the tokenizer is the character-level CLIP BPE
    of `write_clip_vocab`.
    """
    import torch
    from transformers import CLIPConfig, CLIPModel, CLIPProcessor, CLIPTokenizer

    def write(tmp: Path) -> None:
        vocab_size = write_clip_vocab(tmp / "_vocab")
        tokenizer = CLIPTokenizer.from_pretrained(tmp / "_vocab")
        text = dict(
            vocab_size=vocab_size,
            hidden_size=16,
            intermediate_size=32,
            num_attention_heads=2,
            num_hidden_layers=1,
            max_position_embeddings=77,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        vision = dict(
            hidden_size=16,
            intermediate_size=32,
            num_attention_heads=2,
            num_hidden_layers=1,
            image_size=TINY_RESOLUTION // 2,
            patch_size=8,
        )
        torch.manual_seed(seed)
        CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)).save_pretrained(tmp)
        CLIPProcessor(image_processor=_tiny_clip_image_processor(), tokenizer=tokenizer).save_pretrained(tmp)
        shutil.rmtree(tmp / "_vocab")

    return _build_atomically(path, write)


def _tiny_vlm_tokenizer():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = [*_VLM_SPECIALS, *TINY_VLM_WORDS]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    tokenizer.add_special_tokens(list(_VLM_SPECIALS))
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>"
    )


def build_tiny_vlm(path: str | Path, *, seed: int = 0) -> Path:
    """Build and save a tiny random-weight LLaVA (image-text-to-text) with its processor.

    Loads back through ``AutoModelForImageTextToText.from_pretrained(path)`` and
    ``AutoProcessor.from_pretrained(path)``: a CLIP vision tower on 32x32 inputs, a one-layer
    Llama, a word-level tokenizer over `TINY_VLM_WORDS` and a plain chat template.
    """
    import torch
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    def write(tmp: Path) -> None:
        tokenizer = _tiny_vlm_tokenizer()
        vision = CLIPVisionConfig(
            hidden_size=16,
            intermediate_size=32,
            num_attention_heads=2,
            num_hidden_layers=2,
            image_size=TINY_RESOLUTION // 2,
            patch_size=8,
        )
        text = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=16,
            intermediate_size=32,
            num_attention_heads=2,
            num_key_value_heads=2,
            num_hidden_layers=1,
            max_position_embeddings=256,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        config = LlavaConfig(
            vision_config=vision,
            text_config=text,
            image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
            vision_feature_layer=-1,
            vision_feature_select_strategy="default",
        )
        torch.manual_seed(seed)
        LlavaForConditionalGeneration(config).save_pretrained(tmp)
        LlavaProcessor(
            image_processor=_tiny_clip_image_processor(),
            tokenizer=tokenizer,
            patch_size=8,
            vision_feature_select_strategy="default",
            image_token="<image>",
            num_additional_image_tokens=1,
            chat_template=_VLM_CHAT_TEMPLATE,
        ).save_pretrained(tmp)

    return _build_atomically(path, write)
