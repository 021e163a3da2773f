//! A tokenizer's state key compared in place: `tokenizer_state.has_state_key` (the Python
//! module says what the key is made of and why), and the pad-id inputs both the key and the
//! comparison read (`pad_id_inputs`). Every value is compared with Python's own `==` / `!=`
//! and read where transformers reads it (the instance dict, the special tokens map, the
//! backend's `token_to_id`), so the answers are the Python ones, without the interpreter
//! running the comparison line by line.

use pyo3::exceptions::{PyAttributeError, PyKeyError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

/// Where a `StateKey`'s fields sit in its tuple (see `tokenizer_state.StateKey`).
const KEY_CLASS: usize = 0;
const KEY_PAD_ID_INPUTS: usize = 1;
const KEY_PAD_TOKEN_TYPE_ID: usize = 2;
const KEY_PADDING_SIDE: usize = 3;
const KEY_MODEL_INPUT_NAMES: usize = 4;
const KEY_MODEL_MAX_LENGTH: usize = 5;
const KEY_FIELDS: usize = 6;

/// Where the names sit in `tokenizer_state.STATE_NAMES`, the tuple Python passes.
const NAME_SPECIAL_TOKENS_MAP: usize = 0;
const NAME_BACKEND: usize = 1;
const NAME_PAD_TOKEN_TYPE_ID: usize = 2;
const NAME_SHADOWING: usize = 3;
const NAMES: usize = 4;

/// Where the pad token's text and id sit in `PadIdInputs` (`pad_id_inputs`' tuple).
const PAD_TEXT: usize = 0;
const PAD_ID: usize = 1;

/// The pad token's text and the backend's id for it, and where that id is None the unknown
/// token's text and id too: `(pad_text, pad_id, unk_text, unk_id)`, all None without a pad
/// token. `special` is the tokenizer's special tokens map, `backend` its backend tokenizer.
#[pyfunction]
pub fn pad_id_inputs<'py>(
    special: &Bound<'py, PyAny>,
    backend: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let py = special.py();
    let none = py.None().into_bound(py);
    let Some(pad) = special_token(special, intern!(py, "pad_token"))? else {
        return PyTuple::new(py, [&none, &none, &none, &none]);
    };
    let content = pad.str()?.into_any();
    let index = token_to_id(backend, &content)?;
    if !index.is_none() {
        return PyTuple::new(py, [&content, &index, &none, &none]);
    }
    let Some(unk) = special_token(special, intern!(py, "unk_token"))? else {
        return PyTuple::new(py, [&content, &none, &none, &none]);
    };
    let unk_content = unk.str()?.into_any();
    let unk_id = token_to_id(backend, &unk_content)?;
    PyTuple::new(py, [&content, &none, &unk_content, &unk_id])
}

/// Whether `state_key(tokenizer) == key` for a `key` that `state_key` gave; `names` are the
/// attribute names it reads (`tokenizer_state.STATE_NAMES`). A key, a name or a type missing
/// where one is read (`KeyError`, `AttributeError`, `TypeError`) means no.
#[pyfunction]
pub fn has_state_key(
    tokenizer: &Bound<'_, PyAny>,
    key: &Bound<'_, PyTuple>,
    names: &Bound<'_, PyTuple>,
) -> PyResult<bool> {
    let py = tokenizer.py();
    match state_matches(tokenizer, key, names) {
        Err(err)
            if err.is_instance_of::<PyKeyError>(py)
                || err.is_instance_of::<PyAttributeError>(py)
                || err.is_instance_of::<PyTypeError>(py) =>
        {
            Ok(false)
        }
        other => other,
    }
}

fn state_matches<'py>(
    tokenizer: &Bound<'py, PyAny>,
    key: &Bound<'py, PyTuple>,
    names: &Bound<'py, PyTuple>,
) -> PyResult<bool> {
    let py = tokenizer.py();
    if key.len() != KEY_FIELDS || names.len() != NAMES {
        return Err(PyTypeError::new_err(
            "not a tokenizer state key and its names",
        ));
    }
    // The key's class was keyable when the key was made, and keyability is remembered per
    // class: the same class is keyable still.
    if !tokenizer.get_type().is(key.get_item(KEY_CLASS)?) {
        return Ok(false);
    }
    // An instance dict of a dict subclass could answer lookups through Python methods: such
    // a tokenizer is never taken as unchanged.
    let Ok(attributes) = tokenizer
        .getattr(intern!(py, "__dict__"))?
        .cast_into_exact::<PyDict>()
    else {
        return Ok(false);
    };
    // A name set on the instance itself bypasses transformers' lookup.
    for name in names
        .get_item(NAME_SHADOWING)?
        .cast_into::<PyTuple>()?
        .iter()
    {
        if attributes.contains(name)? {
            return Ok(false);
        }
    }
    let attribute = |index: usize| item(&attributes, &names.get_item(index)?);
    let special = attribute(NAME_SPECIAL_TOKENS_MAP)?;
    let backend = attribute(NAME_BACKEND)?;
    let expected = key.get_item(KEY_PAD_ID_INPUTS)?;
    let expected_id = expected.get_item(PAD_ID)?;
    match special_token(&special, intern!(py, "pad_token"))? {
        // The usual case, spelled out: a pad token the vocabulary has.
        Some(pad) if !expected_id.is_none() => {
            let expected_text = expected.get_item(PAD_TEXT)?;
            if pad.str()?.as_any().ne(&expected_text)?
                || token_to_id(&backend, &expected_text)?.ne(&expected_id)?
            {
                return Ok(false);
            }
        }
        _ => {
            if pad_id_inputs(&special, &backend)?.ne(&expected)? {
                return Ok(false);
            }
        }
    }
    let plain = |name: &Bound<'py, PyString>| item(&attributes, name.as_any());
    Ok(
        attribute(NAME_PAD_TOKEN_TYPE_ID)?.eq(key.get_item(KEY_PAD_TOKEN_TYPE_ID)?)?
        && plain(intern!(py, "padding_side"))?.eq(key.get_item(KEY_PADDING_SIDE)?)?
        // (Not a list: never equal, so read through its attributes every call.)
        && plain(intern!(py, "model_input_names"))?.eq(key.get_item(KEY_MODEL_INPUT_NAMES)?)?
        && plain(intern!(py, "model_max_length"))?.eq(key.get_item(KEY_MODEL_MAX_LENGTH)?)?,
    )
}

/// `attributes[name]`: a missing name is a `KeyError`, as the dict's own lookup gives.
fn item<'py>(
    attributes: &Bound<'py, PyDict>,
    name: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    attributes
        .get_item(name)?
        .ok_or_else(|| PyKeyError::new_err(name.clone().unbind()))
}

/// `special.get(name)`, None as no token.
fn special_token<'py>(
    special: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let token = match special.cast_exact::<PyDict>() {
        Ok(map) => map.get_item(name)?,
        Err(_) => Some(special.call_method1(intern!(special.py(), "get"), (name,))?),
    };
    Ok(token.filter(|token| !token.is_none()))
}

fn token_to_id<'py>(
    backend: &Bound<'py, PyAny>,
    text: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    backend.call_method1(intern!(backend.py(), "token_to_id"), (text,))
}
