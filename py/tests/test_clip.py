"""kiln.models.CLIPModel / ImageEmbedder against transformers' CLIPModel and
CLIPImageProcessorPil: the small random ViT-B/32-shaped checkpoint and rendered images of
models/tests/reference/clip (made by make_clip_reference.py with PyTorch and Pillow; committed,
so these tests need neither)."""

import json
import pathlib

import kiln
import numpy as np
import pytest
from kiln.models import CLIPModel, ImageEmbedder

REF = pathlib.Path(__file__).resolve().parents[2] / "models" / "tests" / "reference" / "clip"
MODEL = REF / "model"
# As models/tests/clip.rs: f32 on both sides, summation order only.
COS, MAX_DIFF = 0.9999, 1e-4


@pytest.fixture(scope="module")
def ref():
    return json.loads((REF / "reference.json").read_text())


@pytest.fixture(scope="module")
def images(ref):
    flat = np.load(REF / "images.npy")
    out, at = [], 0
    for h, w, c in ref["shapes"]:
        out.append(flat[at : at + h * w * c].reshape(h, w, c))
        at += h * w * c
    return out


@pytest.fixture(scope="module")
def clip():
    return CLIPModel(MODEL)


def close(got, want):
    assert got.shape == want.shape and got.dtype == np.float32
    for g, w in zip(got, want):
        cos = float(g @ w / np.linalg.norm(g) / np.linalg.norm(w))
        assert cos >= COS and np.abs(g - w).max() <= MAX_DIFF, (cos, np.abs(g - w).max())


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_pixel_values_match_clip_image_processor(clip, images):
    got = clip.pixel_values(images)
    want = np.load(REF / "pixel_values.npy")
    assert got.shape == want.shape == (len(images), 3, 64, 64)
    # PIL's resize reproduced bit for bit: only the f32 rescale / normalise may round apart.
    assert np.abs(got - want).max() <= 1e-5


def test_embeddings_match_transformers(clip, images, ref):
    want_i = np.load(REF / "image_embeds.npy")
    want_t = np.load(REF / "text_embeds.npy")
    close(clip.encode_image(images, normalize=False), want_i)
    close(clip.encode_image(images), unit(want_i))
    assert clip.tokenize(ref["texts"]) == ref["token_ids"]
    close(clip.encode_text(ref["texts"], normalize=False), want_t)
    close(clip.encode_text(ref["texts"]), unit(want_t))
    # One image / one string gives a vector.
    assert clip.encode_image(images[0]).shape == (clip.dim,)
    close(clip.encode_text(ref["texts"][0])[None], unit(want_t[:1]))
    # The vision tower alone: the same numbers.
    alone = ImageEmbedder(MODEL)
    np.testing.assert_array_equal(alone.encode_image(images), clip.encode_image(images))
    assert (alone.dim, alone.image_size) == (24, 64)


def test_pil_images_when_pillow_is_there(clip, images):
    Image = pytest.importorskip("PIL.Image")
    want = clip.encode_image(images[:2])
    got = clip.encode_image([Image.fromarray(images[0]), Image.fromarray(images[1]).convert("RGBA")])
    np.testing.assert_array_equal(got, want)


def test_bad_inputs_raise_and_the_model_keeps_working(clip, images, tmp_path):
    with pytest.raises(TypeError, match="uint8"):
        clip.encode_image([images[0].astype(np.float32)])
    with pytest.raises(ValueError, match="height, width, 3"):
        clip.encode_image([images[0][..., :2]])
    with pytest.raises(kiln.UnsupportedError, match="has none"):
        clip.encode_image([np.zeros((0, 5, 3), np.uint8)])
    with pytest.raises(FileNotFoundError):
        CLIPModel(tmp_path / "missing")
    bad = tmp_path / "siglip"
    bad.mkdir()
    for f in MODEL.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((bad / "config.json").read_text())
    cfg["model_type"] = "siglip"
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(kiln.UnsupportedError, match="siglip"):
        CLIPModel(bad)
    # Non-contiguous views are copied, not refused.
    flipped = images[0][:, ::-1]
    assert clip.encode_image([flipped]).shape == (1, clip.dim)
    close(clip.encode_image(images[:1], normalize=False), np.load(REF / "image_embeds.npy")[:1])


def test_models_is_part_of_the_package():
    assert kiln.models.CLIPModel is CLIPModel and kiln.models.ImageEmbedder is ImageEmbedder
