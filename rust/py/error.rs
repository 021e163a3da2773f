//! Every core error as the Python exception it raises, in one place: the core's messages name
//! the key and row (or index), and pass through unchanged.

use pyo3::exceptions::{PyIndexError, PyMemoryError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::{intern, PyErr};

use crate::core::arrow::ArrowError;
use crate::core::error::{CollateError, ErrorClass};
use crate::core::grouping::GroupingError;
use crate::core::pack_dataset::PackDatasetError;
use crate::core::packing::PackingError;
use crate::core::rebalance::RebalanceError;

/// The raised exception carries the error's `key`, `row` (None where it names none) and
/// `reason` (`CollateError::reason`) as attributes: callers read them, never the message.
impl From<CollateError> for PyErr {
    fn from(err: CollateError) -> Self {
        let message = err.to_string();
        let raised = match err.class() {
            ErrorClass::Type => PyTypeError::new_err(message),
            ErrorClass::Value => PyValueError::new_err(message),
            ErrorClass::Memory => PyMemoryError::new_err(message),
        };
        let (key, row) = err.site();
        Python::attach(|py| {
            let value = raised.value(py);
            // Setting an attribute on a fresh built-in exception does not fail; if it ever
            // did, the exception is raised without it.
            let _ = value.setattr(intern!(py, "key"), key);
            let _ = value.setattr(intern!(py, "row"), row);
            let _ = value.setattr(intern!(py, "reason"), err.reason());
        });
        raised
    }
}

impl From<ArrowError> for PyErr {
    fn from(err: ArrowError) -> Self {
        match err {
            ArrowError::Collate(err) => err.into(),
            ArrowError::OutOfRange { .. } => PyIndexError::new_err(err.to_string()),
            _ => PyValueError::new_err(err.to_string()),
        }
    }
}

impl From<GroupingError> for PyErr {
    fn from(err: GroupingError) -> Self {
        match err {
            GroupingError::Overflow => PyOverflowError::new_err(err.to_string()),
            _ => PyValueError::new_err(err.to_string()),
        }
    }
}

impl From<RebalanceError> for PyErr {
    fn from(err: RebalanceError) -> Self {
        match err {
            RebalanceError::Overflow => PyOverflowError::new_err(err.to_string()),
            _ => PyValueError::new_err(err.to_string()),
        }
    }
}

impl From<PackingError> for PyErr {
    fn from(err: PackingError) -> Self {
        PyValueError::new_err(err.to_string())
    }
}

impl From<PackDatasetError> for PyErr {
    fn from(err: PackDatasetError) -> Self {
        match err {
            PackDatasetError::TooLarge { .. } => PyOverflowError::new_err(err.to_string()),
            PackDatasetError::OutOfMemory { .. } => PyMemoryError::new_err(err.to_string()),
            _ => PyValueError::new_err(err.to_string()),
        }
    }
}
