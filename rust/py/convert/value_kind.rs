//! What a row's value is, asked once for the strict readers: the one exact list/tuple length
//! check (an exact type, not a subclass), which every binding's strict route calls instead of
//! its own copy.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

/// The length of an exact list or tuple, and whether it is a list; None for any other value.
/// The one length check of the strict readers.
#[inline]
pub fn exact_sequence(value: &Bound<'_, PyAny>) -> Option<(usize, bool)> {
    if let Ok(list) = value.cast_exact::<PyList>() {
        return Some((list.len(), true));
    }
    value.cast_exact::<PyTuple>().ok().map(|t| (t.len(), false))
}
