#!/usr/bin/env python3
"""Independent reference for kiln-models' CLIP test (models/tests/clip.rs) and py/tests: a small
randomly initialised transformers CLIPModel with ViT-B/32's structure (patch 32 conv without
bias, class token, pre_layrnorm, pre-norm layers with quick_gelu, post_layernorm on the class
token, projections without bias; the text tower causal, pooled at the first <|endoftext|>) but
reduced width and depth (2 layers, width 32, image 64: a 2 x 2 grid of patches) so that lavapipe
runs it in a second, saved with save_pretrained; CLIP's byte-level BPE tokenizer (lowercase,
</w> word ends, <|startoftext|> / <|endoftext|>) built by transformers' CLIPTokenizer from a
small vocabulary trained here, saved as tokenizer.json; CLIPImageProcessorPil's
preprocessor_config.json (shortest edge 64, center crop 64, PIL bicubic, OpenAI's mean and std).

Then a few images rendered here with numpy (shapes, gradients, noise; odd sizes such as 97 x 61
to exercise resize and crop, one already 64 x 64, one smaller than 64 to upscale, a tall one
that Pillow 13 resamples vertically first), preprocessed by
transformers' CLIPImageProcessorPil (PIL's antialiased bicubic on uint8, as the original CLIP
preprocessing did), and what CLIPModel gives for them and for a few texts:

    PYTHONPATH=<pillow> python3 make_clip_reference.py   # writes clip/

clip/model/           the checkpoint folder Kiln loads (config.json, model.safetensors,
                      tokenizer.json, tokenizer_config.json, preprocessor_config.json)
clip/images.npy       the images, uint8 H x W x 3 each, flattened one after the other (names
                      and shapes in reference.json)
clip/pixel_values.npy CLIPImageProcessorPil's output, float32 [N, 3, 64, 64]
clip/image_embeds.npy get_image_features(pixel_values), float32 [N, projection_dim]
clip/text_embeds.npy  get_text_features(tokenizer(texts, padding, truncation)), [T, projection_dim]
clip/reference.json   texts, image names, token ids, versions

The BPE trainer breaks ties between equally frequent pairs in hash order, so a rerun may number
a few tokens differently: the committed folder and references are made together by one run.

Needs torch, transformers, tokenizers and Pillow (CPU; offline). The outputs are committed; the
Rust test runs without PyTorch.
"""
import json
import os
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import PIL
import tokenizers
import torch
import transformers
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
from transformers import CLIPConfig, CLIPModel, CLIPTokenizer
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "clip")
model_dir = os.path.join(out, "model")

WIDTH, LAYERS, HEADS, FF, PROJ = 32, 2, 2, 64, 24
IMAGE, PATCH = 64, 32
MAX_POS = 77

CORPUS = [
    "a photo of a cat",
    "a photo of a dog",
    "a diagram of a red circle on a blue square",
    "the quick brown fox jumps over the lazy dog",
    "gradients, stripes and checkerboards rendered with numpy",
    "a green triangle next to a yellow star",
    "It's CLIP: contrastive language-image pre-training, 2021",
] * 4

TEXTS = [
    "a photo of a cat",
    "",
    "A Red CIRCLE on a blue square!",
    "it's a   diagram\tof 3 shapes, don't you think?",
    "Café naïve 🔥",
    # Longer than the 77 positions: truncated, <|endoftext|> kept last.
    " ".join(["a photo of a cat next to a dog"] * 12),
]


def build_tokenizer():
    """CLIP's BPE over a vocabulary trained on CORPUS, in CLIP's order: the 256 byte symbols,
    the same with </w>, the merged symbols, then the two special tokens."""
    split = pre_tokenizers.Split(
        Regex(r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""),
        behavior="removed",
        invert=True,
    )
    t = Tokenizer(models.BPE(end_of_word_suffix="</w>"))
    t.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    t.pre_tokenizer = pre_tokenizers.Sequence([split, pre_tokenizers.ByteLevel(add_prefix_space=False)])
    trainer = trainers.BpeTrainer(
        vocab_size=900, end_of_word_suffix="</w>", initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    t.train_from_iterator(CORPUS, trainer)
    merges = json.loads(t.to_str())["model"]["merges"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {}
    for s in alphabet + [a + "</w>" for a in alphabet]:
        vocab[s] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    for s in ["<|startoftext|>", "<|endoftext|>"]:
        vocab[s] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=list(merges), model_max_length=MAX_POS)


def render_images():
    """Shapes, gradients and noise, uint8 H x W x 3, in sizes that take every path of resize
    and crop: wider than tall, taller than wide, the model's size, smaller than it."""
    rng = np.random.default_rng(7)
    imgs = {}

    def grid(h, w):
        return np.mgrid[0:h, 0:w].astype(np.float64)

    h, w = 61, 97  # wide, odd: resize to 64 x 101, crop
    y, x = grid(h, w)
    img = np.stack([x / (w - 1) * 255, y / (h - 1) * 255, np.full((h, w), 90.0)], -1)
    img[(x - 60) ** 2 + (y - 30) ** 2 < 18**2] = [240, 30, 40]  # red disc
    imgs["disc_97x61"] = img

    h, w = 64, 64  # the model's size: no resize
    y, x = grid(h, w)
    img = np.zeros((h, w, 3)) + [20, 30, 200]
    img[10:40, 8:30] = [250, 250, 10]  # yellow rectangle
    img[(y > 30) & (y < 60) & (np.abs(x - 45) < (y - 30) / 2)] = [10, 200, 40]  # green triangle
    imgs["shapes_64x64"] = img

    h, w = 150, 200  # downscale (antialiased), checkerboard plus noise
    y, x = grid(h, w)
    checker = ((x // 13 + y // 9) % 2) * 180 + 40
    img = np.stack([checker, 255 - checker, (x + y) % 256], -1) + rng.normal(0, 25, (h, w, 3))
    imgs["checker_200x150"] = img

    h, w = 130, 50  # tall: resize to 166 x 64, crop rows
    y, x = grid(h, w)
    img = np.stack([np.sin(y / 7) * 120 + 128, np.cos(x / 5) * 120 + 128, y / h * 255], -1)
    img[50:80, 10:40] = [255, 255, 255]
    imgs["stripes_50x130"] = img

    h, w = 200, 80  # tall, shrinking: Pillow 13 resamples vertically first (136 > 2 * 16)
    y, x = grid(h, w)
    img = np.stack([(x * 3 + y) % 256, np.abs(np.sin(y / 11)) * 255, 255 - y], -1) + rng.normal(0, 10, (h, w, 3))
    img[(x - 40) ** 2 + (y - 120) ** 2 < 25**2] = [250, 120, 0]
    imgs["tall_80x200"] = img

    h, w = 30, 40  # smaller than 64: upscale
    img = rng.integers(0, 256, (h, w, 3)).astype(np.float64)
    img[5:25, 5:15] = [0, 0, 0]
    imgs["noise_40x30"] = img

    return {k: np.clip(np.round(v), 0, 255).astype(np.uint8) for k, v in imgs.items()}


def randomize(model):
    """Weights wide enough that every part moves the output past the test's tolerance."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name or "layernorm" in name or "layrnorm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn(p.shape, generator=g))
            elif "patch_embedding" in name:
                p.copy_(0.03 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))


def main():
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(model_dir)
    tok = build_tokenizer()
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    bos = tok.convert_tokens_to_ids("<|startoftext|>")
    layers = dict(hidden_size=WIDTH, intermediate_size=FF, num_hidden_layers=LAYERS, num_attention_heads=HEADS)
    config = CLIPConfig(
        text_config=dict(vocab_size=len(tok), max_position_embeddings=MAX_POS, eos_token_id=eos, bos_token_id=bos,
                         pad_token_id=eos, **layers),
        vision_config=dict(image_size=IMAGE, patch_size=PATCH, **layers),
        projection_dim=PROJ,
    )
    torch.manual_seed(0)
    model = CLIPModel(config).eval()
    randomize(model)
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    proc = CLIPImageProcessorPil(size={"shortest_edge": IMAGE}, crop_size={"height": IMAGE, "width": IMAGE})
    proc.save_pretrained(model_dir)
    for f in os.listdir(model_dir):  # only what Kiln reads
        if f not in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                     "preprocessor_config.json"):
            os.remove(os.path.join(model_dir, f))

    images = render_images()
    names = list(images)
    pixel_values = proc([images[n] for n in names], return_tensors="np")["pixel_values"].astype(np.float32)
    enc = tok(TEXTS, padding=True, truncation=True, max_length=MAX_POS, return_tensors="pt")
    with torch.no_grad():
        image_embeds = model.get_image_features(pixel_values=torch.from_numpy(pixel_values))
        text_embeds = model.get_text_features(**enc)
    # transformers 5 returns the output object with the projected pooler_output.
    image_embeds = getattr(image_embeds, "pooler_output", image_embeds).numpy().astype(np.float32)
    text_embeds = getattr(text_embeds, "pooler_output", text_embeds).numpy().astype(np.float32)

    # The references must tell the parts apart: a wrong mean, a resize without antialias, the
    # text pooled at the last token instead of <|endoftext|> each move the output by far more
    # than the test's tolerance.
    wrong_mean = proc([images[n] for n in names], return_tensors="np", image_mean=[0.5, 0.5, 0.5])["pixel_values"]
    with torch.no_grad():
        moved = model.get_image_features(pixel_values=torch.from_numpy(wrong_mean.astype(np.float32)))
    moved = getattr(moved, "pooler_output", moved).numpy()
    assert np.abs(moved - image_embeds).max() > 1e-2, np.abs(moved - image_embeds).max()

    np.save(os.path.join(out, "images.npy"), np.concatenate([images[n].reshape(-1) for n in names]))
    np.save(os.path.join(out, "pixel_values.npy"), pixel_values)
    np.save(os.path.join(out, "image_embeds.npy"), image_embeds)
    np.save(os.path.join(out, "text_embeds.npy"), text_embeds)
    ids = [[int(i) for i, m in zip(row, mask) if m] for row, mask in zip(enc["input_ids"], enc["attention_mask"])]
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(
            {
                "images": names,
                "shapes": [list(images[n].shape) for n in names],
                "texts": TEXTS,
                "token_ids": ids,
                "versions": {
                    "torch": torch.__version__,
                    "transformers": transformers.__version__,
                    "tokenizers": tokenizers.__version__,
                    "pillow": PIL.__version__,
                    "numpy": np.__version__,
                },
            },
            f,
            indent=1,
            ensure_ascii=False,
        )
        f.write("\n")
    print("images", {n: images[n].shape for n in names})
    print("token ids", [len(i) for i in ids])
    print("image_embeds", image_embeds.shape, "text_embeds", text_embeds.shape)


if __name__ == "__main__":
    main()
