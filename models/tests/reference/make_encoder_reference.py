#!/usr/bin/env python3
"""Independent reference for kiln-models' encoder-family test (models/tests/encoders.rs): builds a
small randomly initialised model of each BERT-family architecture that SentenceEmbedder runs,
with the family's own tokenizer class and special-token layout, saves each as a
sentence-transformers folder (save_pretrained: safetensors; the folder layout of the Hub's
sentence-transformers models: modules.json, sentence_bert_config.json, 1_Pooling/config.json),
then loads each folder back with sentence-transformers and writes what it gives:

    python3 make_encoder_reference.py      # writes encoders/<family>/ and encoders/reference.json

Families: bert (WordPiece), roberta (byte-level BPE; positions from padding_idx + 1),
xlm-roberta (Unigram/SentencePiece-style tokenizer.json; same positions), mpnet (WordPiece with
<s>/</s>; positions from padding_idx + 1, relative position bias). Every family is referenced
under every pooling mode kiln supports (cls, mean, max, mean_sqrt_len_tokens, weightedmean,
lasttoken, and one concatenation), and normalised after cls and mean. The weights are drawn with a
wide initializer (0.2, layer norms perturbed) so that attention, positions and the relative bias
change the output well past the test's tolerance; the script checks that they do.

Needs torch, transformers, sentence-transformers and tokenizers (CPU; offline). The outputs are
committed; the Rust test runs without PyTorch. Versions are recorded in reference.json.
"""
import json
import os
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import sentence_transformers
import tokenizers
import torch
import transformers
from sentence_transformers import SentenceTransformer
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

here = os.path.dirname(os.path.abspath(__file__))
out_root = os.path.join(here, "encoders")

HIDDEN, LAYERS, HEADS, FF = 64, 2, 4, 128
MAX_SEQ = 32

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world, hello GPUs: kiln runs sentence embeddings everywhere.",
    "A sentence-transformers model maps sentences to dense vectors.",
    "Café, naïve, résumé and déjà vu keep their accents.",
    "東京は日本の首都です。北京是中国的首都。",
    "Numbers like 3.14159, 42 and 2026 appear in text too.",
    "Emoji 🔥🚀 and symbols © ™ are rare but real.",
    "Padding, truncation and pooling must match the reference exactly.",
    "positions offsets relative buckets attention heads layers",
] * 3

SENTENCES = [
    "",
    "Hello world",
    "  The quick brown fox jumps over the lazy dog.  ",
    "Café naïve résumé — déjà vu",
    "GPUs 🔥 everywhere 🚀",
    "東京は日本の首都です",
    # Far past max_position_embeddings: truncated at max_seq_length (the last kept token is the
    # separator).
    " ".join(["padding truncation pooling positions relative buckets"] * 20),
    "numbers 3.14159 and 42",
    # Special tokens spelled in the text: the tokenizer maps them to their ids; RoBERTa's and
    # MPNet's position ids skip a token equal to padding_idx, as transformers does.
    "a <pad> b [PAD] c",
    "x",
]

# (name in reference.json, sentence-transformers' pooling_mode)
POOLINGS = [
    ("cls", "cls"),
    ("mean", "mean"),
    ("max", "max"),
    ("mean_sqrt_len_tokens", "mean_sqrt_len_tokens"),
    ("weightedmean", "weightedmean"),
    ("lasttoken", "lasttoken"),
    ("cls+max+mean", ("cls", "max", "mean")),
]


def wordpiece_vocab(specials, lowercase):
    tok = Tokenizer(models.WordPiece(unk_token=specials[1]))
    norm = [normalizers.NFD(), normalizers.StripAccents()] if lowercase else []
    tok.normalizer = normalizers.Sequence([*norm, normalizers.Lowercase()] if lowercase else [normalizers.NFC()])
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=220, special_tokens=specials))
    return tok.get_vocab()


def bert_family(family):
    if family == "bert":
        vocab = wordpiece_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], lowercase=True)
        tok = transformers.BertTokenizer(vocab=vocab, do_lower_case=True)
        cfg = transformers.BertConfig(max_position_embeddings=MAX_SEQ, type_vocab_size=2, pad_token_id=0)
        return tok, cfg, transformers.BertModel
    if family == "mpnet":
        vocab = wordpiece_vocab(["<s>", "<pad>", "</s>", "[UNK]", "<mask>"], lowercase=True)
        # MPNet's own layout: <s>=0, <pad>=1, </s>=2; [UNK] as all-mpnet-base-v2 has it.
        vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "[UNK]": 3, **{k: v for k, v in vocab.items() if v > 4}, "<mask>": 4}
        tok = transformers.MPNetTokenizer(vocab=vocab, do_lower_case=True)
        cfg = transformers.MPNetConfig(max_position_embeddings=MAX_SEQ + 2, relative_attention_num_buckets=32)
        return tok, cfg, transformers.MPNetModel
    if family == "roberta":
        bpe = Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.train_from_iterator(
            CORPUS,
            trainers.BpeTrainer(
                vocab_size=300,
                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            ),
        )
        state = json.loads(bpe.to_str())["model"]
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]
        tok = transformers.RobertaTokenizer(vocab=state["vocab"], merges=merges)
        cfg = transformers.RobertaConfig(
            max_position_embeddings=MAX_SEQ + 2, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2
        )
        return tok, cfg, transformers.RobertaModel
    if family == "xlm-roberta":
        uni = Tokenizer(models.Unigram())
        uni.normalizer = normalizers.NFKC()
        uni.pre_tokenizer = pre_tokenizers.Metaspace()
        uni.train_from_iterator(
            CORPUS,
            trainers.UnigramTrainer(
                vocab_size=200, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], unk_token="<unk>"
            ),
        )
        pieces = [(p, s) for p, s in json.loads(uni.to_str())["model"]["vocab"]] + [("<mask>", 0.0)]
        tok = transformers.XLMRobertaTokenizer(vocab=pieces)
        cfg = transformers.XLMRobertaConfig(
            max_position_embeddings=MAX_SEQ + 2, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2
        )
        return tok, cfg, transformers.XLMRobertaModel
    raise ValueError(family)


def build(family, seed):
    torch.manual_seed(seed)
    tok, cfg, cls = bert_family(family)
    cfg.vocab_size = len(tok)
    cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.intermediate_size = HIDDEN, LAYERS, HEADS, FF
    cfg.initializer_range = 0.2
    model = cls(cfg, add_pooling_layer=False)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
                p.add_(torch.randn_like(p) * 0.2)
            elif name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.1)
            elif "relative_attention_bias" in name:
                p.copy_(torch.randn_like(p))  # a bias the softmax feels
    model.eval()
    return tok, model


def legacy_folder(family, tok, model, folder):
    """The folder layout of sentence-transformers 2.x/3.x (the Hub's models): modules.json with
    sentence_transformers.models.*, sentence_bert_config.json with max_seq_length, and the
    pooling_mode_* booleans."""
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "1_Pooling"))
    model.save_pretrained(folder, safe_serialization=True)
    tok.model_max_length = MAX_SEQ
    tok.save_pretrained(folder)
    for junk in ("README.md", "special_tokens_map.json", "vocab.txt", "vocab.json", "merges.txt"):
        if os.path.exists(os.path.join(folder, junk)):
            os.remove(os.path.join(folder, junk))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    json.dump(modules, open(os.path.join(folder, "modules.json"), "w"), indent=2)
    json.dump({"max_seq_length": MAX_SEQ, "do_lower_case": False}, open(os.path.join(folder, "sentence_bert_config.json"), "w"))
    json.dump(
        {
            "word_embedding_dimension": HIDDEN,
            "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True,
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
        },
        open(os.path.join(folder, "1_Pooling", "config.json"), "w"),
        indent=2,
    )


def as_list(a):
    """float32 values as JSON numbers of 9 significant digits: enough to give the same float32
    back, and about half the text of float64's repr."""
    return [[float(f"{v:.9g}") for v in row] for row in a.astype(np.float32).tolist()]


def encode(st, normalize):
    return st.encode(SENTENCES, batch_size=4, convert_to_numpy=True, normalize_embeddings=normalize).astype(np.float32)


def main():
    from sentence_transformers.base.modules import Normalize
    from sentence_transformers.sentence_transformer.modules import Pooling

    torch.set_num_threads(2)
    shutil.rmtree(out_root, ignore_errors=True)
    os.makedirs(out_root)
    reference = {
        "generator": f"sentence-transformers {sentence_transformers.__version__}, transformers "
        f"{transformers.__version__}, torch {torch.__version__}, tokenizers {tokenizers.__version__}",
        "sentences": SENTENCES,
        "max_seq_length": MAX_SEQ,
        "families": {},
    }
    for seed, family in enumerate(["bert", "roberta", "xlm-roberta", "mpnet"]):
        folder = os.path.join(out_root, family)
        tok, model = build(family, seed)
        legacy_folder(family, tok, model, folder)
        st = SentenceTransformer(folder, device="cpu")
        assert st.max_seq_length == MAX_SEQ, st.max_seq_length
        features = st.tokenize(SENTENCES)
        ids = [
            [t for t, m in zip(row, mask) if m == 1]
            for row, mask in zip(features["input_ids"].tolist(), features["attention_mask"].tolist())
        ]
        assert max(len(i) for i in ids) == MAX_SEQ, "the long sentence must be truncated"
        transformer = st[0]
        fam = {"token_ids": ids, "embeddings": {}}
        for name, mode in POOLINGS:
            pooled = SentenceTransformer(modules=[transformer, Pooling(HIDDEN, pooling_mode=mode)], device="cpu")
            normed = SentenceTransformer(
                modules=[transformer, Pooling(HIDDEN, pooling_mode=mode), Normalize()], device="cpu"
            )
            fam["embeddings"][name] = as_list(encode(pooled, False))
            if name in ("cls", "mean"):
                fam["embeddings"][name + "+normalize"] = as_list(encode(normed, False))
        # What the folder itself gives (its own pooling config: mean) must be the mean row.
        assert np.allclose(encode(st, False), np.array(fam["embeddings"]["mean"], dtype=np.float32), atol=0, rtol=0)
        check_sensitivity(family, st, np.array(fam["embeddings"]["mean"], dtype=np.float32))
        reference["families"][family] = fam
        print(family, "lengths", [len(i) for i in ids])
    if True:
        # MPNet's relative position buckets, as transformers computes them (float32 logs), for
        # every relative position a 600-token input has.
        rel = torch.arange(-600, 601)
        buckets = transformers.models.mpnet.modeling_mpnet.MPNetEncoder.relative_position_bucket(rel)
        reference["mpnet_buckets"] = {"from": -600, "buckets": buckets.tolist()}
    with open(os.path.join(out_root, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, ensure_ascii=False, separators=(",", ":"))
    size = sum(os.path.getsize(os.path.join(r, n)) for r, _, ns in os.walk(out_root) for n in ns)
    print(f"{size / 1e6:.2f} MB in {out_root}")


def check_sensitivity(family, st, mean):
    """The reference must tell a wrong position rule or a missing relative bias from the right
    one by far more than the test's tolerance (1e-4)."""
    model = st[0].auto_model
    emb = model.embeddings
    saved = emb.position_embeddings.weight.detach().clone()
    with torch.no_grad():
        # Positions shifted by one: what a BERT-style rule (from 0) would read for RoBERTa/MPNet,
        # or an off-by-one for BERT.
        emb.position_embeddings.weight.copy_(torch.roll(saved, 1, 0))
    shifted = encode(st, False)
    with torch.no_grad():
        emb.position_embeddings.weight.copy_(saved)
    worst = np.abs(shifted - mean).max()
    assert worst > 1e-2, f"{family}: positions off by one change the output only by {worst}"
    if family == "mpnet":
        bias = model.encoder.relative_attention_bias.weight
        kept = bias.detach().clone()
        with torch.no_grad():
            bias.zero_()
        flat = encode(st, False)
        with torch.no_grad():
            bias.copy_(kept)
        worst = np.abs(flat - mean).max()
        assert worst > 1e-2, f"mpnet without relative bias differs only by {worst}"
    assert np.abs(encode(st, False) - mean).max() == 0


if __name__ == "__main__":
    main()
