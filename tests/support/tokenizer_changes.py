"""Changes to what padding reads from a tokenizer, made between two batches: each must show in
the next batch exactly as it does in transformers' collator (tests of the remembered tokenizer
state and of the collators' call plans)."""

from __future__ import annotations

import tokenizers


def _set(name, value):
    return lambda tok: setattr(tok, name, value)


def _swap_in_vocabulary(first, second):
    """Replaces the backend's model with one whose vocabulary swaps two tokens' ids."""

    def swap(tok):
        vocab = tok.backend_tokenizer.get_vocab(with_added_tokens=False)
        vocab[first], vocab[second] = vocab[second], vocab[first]
        tok.backend_tokenizer.model = tokenizers.models.WordPiece(vocab=vocab, unk_token="[UNK]")

    return swap


# Each a sequence of changes to what padding reads from the tokenizer; after each, the next
# batch must be transformers'.
CHANGES = {
    "padding side": [_set("padding_side", "left")],
    "pad token in the vocabulary": [_set("pad_token", "[UNK]")],
    "pad token by id": [_set("pad_token_id", 103)],
    # Unknown at first (the unknown token's id), then a new id once added: the pad token
    # itself does not change, only the vocabulary.
    "pad token outside the vocabulary, then added to it": [
        _set("pad_token", "<pad-new>"),
        lambda tok: tok.add_tokens(["<pad-new>"]),
    ],
    "unknown token while the pad token is outside the vocabulary": [
        _set("pad_token", "<pad-new>"),
        _set("unk_token", "[SEP]"),
    ],
    "no pad token": [_set("pad_token", None)],
    "pad token type id": [_set("_pad_token_type_id", 3)],
    "model input names replaced": [_set("model_input_names", ["input_ids", "token_type_ids"])],
    # Some transformers versions share the class's list with every instance: the tokenizer
    # gets its own copy (the same names, so the same settings) before it is changed in place.
    "model input names changed in place": [
        lambda tok: (
            setattr(tok, "model_input_names", list(tok.model_input_names)),
            tok.model_input_names.remove("attention_mask"),
        )
    ],
    "model max length": [_set("model_max_length", 9)],
    # The pad token's AddedToken object stays, its text is changed in place.
    "pad token's text changed in place": [
        lambda tok: setattr(tok._special_tokens_map["pad_token"], "content", "[UNK]")
    ],
    # The backend object and its vocabulary size stay, the pad token's id changes.
    "vocabulary replaced with one of the same size": [
        _set("pad_token", "hello"),
        _swap_in_vocabulary("hello", "world"),
    ],
    "token lookup replaced on the instance": [_set("convert_tokens_to_ids", lambda token: 7)],
}
