# Type stubs for kiln.models (models.py; CausalLM and Generation come from the Rust extension).
import os
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np

__all__ = ["CLIPModel", "CausalLM", "Generation", "ImageEmbedder", "SentenceEmbedder"]

# An RGB uint8 image: a numpy array (height, width, 3) or a PIL image; or a list of them.
_Image = Any
_Images = Union[_Image, Sequence[_Image]]
# Where a model's copies go: None (the default device), "all" (every GPU), or kiln.Device objects
# or device indices.
_Devices = Union[None, str, Sequence[Any]]

class ImageEmbedder:
    model_dir: str
    def __init__(self, model_dir: Union[str, os.PathLike]) -> None: ...
    @property
    def dim(self) -> int: ...
    @property
    def image_size(self) -> int: ...
    def encode_image(self, images: _Images, normalize: bool = True) -> np.ndarray: ...
    def pixel_values(self, images: _Images) -> np.ndarray: ...

class CLIPModel(ImageEmbedder):
    def tokenize(self, texts: Union[str, Iterable[str]]) -> List[List[int]]: ...
    def encode_text(self, texts: Union[str, Iterable[str]], normalize: bool = True) -> np.ndarray: ...

class SentenceEmbedder:
    model_dir: str
    def __init__(
        self,
        model_dir: Union[str, os.PathLike],
        dtype: Union[str, np.dtype, type] = "float32",
        devices: _Devices = None,
        shares: Optional[Sequence[float]] = None,
    ) -> None: ...
    @property
    def devices(self) -> List[int]: ...
    @property
    def dtype(self) -> np.dtype: ...
    @property
    def max_seq_length(self) -> int: ...
    def get_sentence_embedding_dimension(self) -> int: ...
    def tokenize(self, sentences: Union[str, Iterable[str]]) -> List[List[int]]: ...
    def encode(
        self,
        sentences: Union[str, Iterable[str]],
        batch_size: int = 32,
        normalize: Optional[bool] = None,
        normalize_embeddings: Optional[bool] = None,
    ) -> np.ndarray: ...

class Generation(Iterator[str]):
    def __iter__(self) -> "Generation": ...
    def __next__(self) -> str: ...

class CausalLM:
    def __init__(self, path: Union[str, os.PathLike], devices: _Devices = None) -> None: ...
    @property
    def devices(self) -> List[int]: ...
    def generate(
        self,
        prompt: str,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
        seed: Optional[int] = None,
        stop: Optional[List[str]] = None,
        chat: bool = False,
    ) -> str: ...
    def stream(
        self,
        prompt: str,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
        seed: Optional[int] = None,
        stop: Optional[List[str]] = None,
        chat: bool = False,
    ) -> Generation: ...
    def generate_batch(
        self,
        prompts: List[str],
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
        seed: Optional[int] = None,
        stop: Optional[List[str]] = None,
        chat: bool = False,
    ) -> List[str]: ...
    def tokenize(self, text: str) -> List[int]: ...
    def detokenize(self, ids: Sequence[int]) -> str: ...
    def logits(self, ids: Union[str, Sequence[int]], all_positions: bool = False) -> np.ndarray: ...
    def score(self, ids: Union[str, Sequence[int]]) -> np.ndarray: ...
    def perplexity(self, ids: Union[str, Sequence[int]]) -> float: ...
    def chat_prompt(self, prompt: Union[str, List[dict]], add_generation_prompt: bool = True) -> str: ...
