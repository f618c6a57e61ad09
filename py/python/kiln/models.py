"""Real models on Kiln's GPU runtime.

``CausalLM`` generates text from a Llama-architecture GGUF file (SmolLM2 and others), its
weights kept quantized on the GPU::

    from kiln.models import CausalLM
    lm = CausalLM("build/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    print(lm.generate("The capital of France is", max_new_tokens=16))
    for piece in lm.stream("Write a haiku about the sea.", chat=True, temperature=0.7, seed=1):
        print(piece, end="", flush=True)

``SentenceEmbedder`` runs a sentence-transformers model of the BERT family (bert, roberta,
xlm-roberta and mpnet encoders such as all-MiniLM-L6-v2, bge, e5, all-mpnet-base-v2; the folder's
pooling and normalisation) from its directory, with sentence-transformers' ``encode`` conventions::

    from kiln.models import SentenceEmbedder
    model = SentenceEmbedder("build/models/all-MiniLM-L6-v2")
    emb = model.encode(["Hello world", "GPUs everywhere"])   # numpy float32 (2, 384)
    model = SentenceEmbedder("build/models/all-MiniLM-L6-v2", devices="all")  # a copy per GPU

``CLIPModel`` runs a transformers CLIPModel folder (OpenAI's CLIP ViT-B/32 and its kin): images
and texts into one embedding space, the images preprocessed on the GPU as CLIPImageProcessor does
(PIL's bicubic resize, center crop, normalise); ``ImageEmbedder`` is its vision tower alone::

    from kiln.models import CLIPModel
    clip = CLIPModel("build/models/clip-vit-base-patch32")
    img = clip.encode_image([np.asarray(pil_image)])              # float32 (1, 512), unit rows
    txt = clip.encode_text(["a photo of a cat", "a diagram"])    # float32 (2, 512)
    probs = (100 * img @ txt.T)                                   # CLIP's logits

The GPU work runs with the GIL released, so other Python threads carry on meanwhile.
"""

from __future__ import annotations

import os
from typing import Iterable, Optional, Sequence, Union

import numpy as np

from ._kiln import CausalLM, Generation, _ClipModel, _ImageEmbedder, _SentenceEmbedder

__all__ = ["CLIPModel", "CausalLM", "Generation", "ImageEmbedder", "SentenceEmbedder"]


class SentenceEmbedder:
    """A sentence-transformers model directory (config.json, model.safetensors, tokenizer.json,
    sentence_bert_config.json, 1_Pooling/config.json, modules.json) loaded onto the GPU.

    ``devices`` spreads ``encode`` over several GPUs (data parallel): ``"all"`` (every GPU of the
    machine) or a list of ``kiln.Device`` / device indices; one copy of the model per device, a
    call's batches dealt to them (``shares``: each device's part, equal by default), the rows in
    input order, each row the bits one device gives it. An error on any device raises one
    exception of that error's kind, its message naming the device.

    ``dtype="float16"`` casts the weights to f16 once at load and computes in f16 (accumulating
    in f32 inside the kernels); it needs an adapter with SHADER_F16 (``kiln.UnsupportedError``
    otherwise). A missing file raises ``FileNotFoundError``; a file that is not what it should be
    (bad JSON, corrupt safetensors, wrong weight shape) raises ``ValueError``.
    """

    def __init__(
        self,
        model_dir: Union[str, os.PathLike],
        dtype: Union[str, np.dtype, type] = "float32",
        devices=None,
        shares: Optional[Sequence[float]] = None,
    ):
        dt = np.dtype(dtype)
        if dt not in (np.float32, np.float16):
            raise ValueError(f"dtype must be float32 or float16, got {dt}")
        self.model_dir = os.fspath(model_dir)
        self._m = _SentenceEmbedder(
            self.model_dir, f16=dt == np.float16, devices=devices, shares=None if shares is None else list(shares)
        )

    @property
    def devices(self) -> list:
        """The adapter index of each copy of the model (``kiln.devices()``'s order)."""
        return self._m.devices

    @property
    def dtype(self) -> np.dtype:
        """The dtype the model computes in (embeddings are float32 either way)."""
        return np.dtype(np.float16 if self._m.f16 else np.float32)

    @property
    def max_seq_length(self) -> int:
        """Texts are truncated at this many tokens (with [CLS] and [SEP])."""
        return self._m.max_seq_length

    def get_sentence_embedding_dimension(self) -> int:
        """The embedding width (384 for all-MiniLM-L6-v2), as sentence-transformers names it."""
        return self._m.dim

    def tokenize(self, sentences: Iterable[str]) -> list:
        """Token ids per text, with [CLS] and [SEP], truncated at ``max_seq_length``."""
        return self._m.tokenize([sentences] if isinstance(sentences, str) else _texts(sentences))

    def encode(
        self,
        sentences: Union[str, Iterable[str]],
        batch_size: int = 32,
        normalize: Optional[bool] = None,
        normalize_embeddings: Optional[bool] = None,
    ) -> np.ndarray:
        """Embeddings as a float32 numpy array: ``(len(sentences), dim)``, or ``(dim,)`` for one
        string (as sentence-transformers returns).

        ``normalize`` (or sentence-transformers' name, ``normalize_embeddings``) L2-normalises
        each embedding; None follows the model (its modules.json has a Normalize module:
        all-MiniLM-L6-v2 does). Texts are sorted by length into batches of ``batch_size`` so a
        batch pads little; the result is in input order.
        """
        if normalize is not None and normalize_embeddings is not None and normalize != normalize_embeddings:
            raise ValueError("normalize and normalize_embeddings disagree")
        norm = normalize if normalize is not None else normalize_embeddings
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        single = isinstance(sentences, str)
        texts = [sentences] if single else _texts(sentences)
        out = self._m.encode(texts, batch_size, None if norm is None else bool(norm))
        return out[0] if single else out

    def __repr__(self) -> str:
        devices = f", devices={self.devices}" if len(self.devices) > 1 else ""
        return f"SentenceEmbedder({self.model_dir!r}, dtype={self.dtype.name}{devices})"


def _texts(sentences: Iterable[str]) -> list:
    texts = list(sentences)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"sentences[{i}] is {type(t).__name__}, not str")
    return texts


def _images(images) -> tuple:
    """One image or a list of them, as C-contiguous uint8 (H, W, 3) arrays; whether it was one.
    An image is a numpy array (or anything np.asarray takes) of RGB uint8, or a PIL image
    (converted to RGB, as CLIPImageProcessor's do_convert_rgb does)."""

    def one(im, i):
        if hasattr(im, "convert") and hasattr(im, "mode"):  # a PIL image, without importing PIL
            im = im.convert("RGB") if im.mode != "RGB" else im
        a = np.asarray(im)
        if a.dtype != np.uint8:
            raise TypeError(f"images[{i}] has dtype {a.dtype}; expected uint8 RGB (H, W, 3)")
        if a.ndim != 3 or a.shape[2] != 3:
            raise ValueError(f"images[{i}] has shape {a.shape}; expected (height, width, 3) RGB")
        return np.ascontiguousarray(a)

    single = (hasattr(images, "mode") and hasattr(images, "convert")) or (
        isinstance(images, np.ndarray) and images.ndim == 3
    )
    if single:
        return [one(images, 0)], True
    return [one(im, i) for i, im in enumerate(images)], False


class ImageEmbedder:
    """CLIP's vision tower alone, from a CLIPModel folder (config.json, model.safetensors,
    preprocessor_config.json): images to embeddings. Errors as ``SentenceEmbedder``'s; an
    unsupported configuration (another model type, an activation or preprocessing kiln does not
    run) raises ``kiln.UnsupportedError`` naming it."""

    _cls = _ImageEmbedder

    def __init__(self, model_dir: Union[str, os.PathLike]):
        self.model_dir = os.fspath(model_dir)
        self._m = self._cls(self.model_dir)

    @property
    def dim(self) -> int:
        """The embedding width (projection_dim: 512 for ViT-B/32)."""
        return self._m.dim

    @property
    def image_size(self) -> int:
        """The side of the square the preprocessing brings every image to (224 for ViT-B/32)."""
        return self._m.image_size

    def encode_image(self, images, normalize: bool = True) -> np.ndarray:
        """Embeddings as float32: ``(len(images), dim)``, or ``(dim,)`` for one image.

        ``images``: an RGB uint8 array (H, W, 3) or a PIL image, or a list of them, any sizes.
        ``normalize`` L2-normalises each embedding (CLIP compares by cosine); False gives
        transformers' ``get_image_features``.
        """
        ims, single = _images(images)
        out = self._m.encode_image(ims, bool(normalize))
        return out[0] if single else out

    def pixel_values(self, images) -> np.ndarray:
        """The preprocessing alone: float32 (N, 3, S, S), as CLIPImageProcessor's pixel_values."""
        ims, _ = _images(images)
        return self._m.pixel_values(ims)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_dir!r})"


class CLIPModel(ImageEmbedder):
    """A transformers CLIPModel folder (config.json, model.safetensors, tokenizer.json,
    preprocessor_config.json): ``encode_image`` and ``encode_text`` into one space."""

    _cls = _ClipModel

    def tokenize(self, texts: Union[str, Iterable[str]]) -> list:
        """Token ids per text, with <|startoftext|> and <|endoftext|>, truncated to the
        position table (77 for CLIP)."""
        return self._m.tokenize([texts] if isinstance(texts, str) else _texts(texts))

    def encode_text(self, texts: Union[str, Iterable[str]], normalize: bool = True) -> np.ndarray:
        """Embeddings as float32: ``(len(texts), dim)``, or ``(dim,)`` for one string.
        ``normalize`` as in ``encode_image``; False gives ``get_text_features``."""
        single = isinstance(texts, str)
        out = self._m.encode_text([texts] if single else _texts(texts), bool(normalize))
        return out[0] if single else out
