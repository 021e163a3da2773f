//! Binding for TRL's padded SFT batch read straight from the rows: `input_ids` and `labels`
//! written once into their padded int64 buffers, the attention mask (and position ids) beside
//! them, each handed to the caller's tensor conversion. Only for the usual batch; any other
//! gives None and the caller takes the general path, which checks the rows and names the bad
//! one. Nothing here runs Python code before it gives up, so giving up changes nothing.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::core::pad::{self, Data, Layout, Output, Strategy};

use crate::py::convert::reader::{OptionalValues, Reader, Values};
use crate::py::output::torch_tensors;

/// The usual batch as the reader's strict route takes it: a non-empty exact list or tuple of
/// exact dicts, each with `input_ids` a non-empty exact list or tuple, and `labels` (where
/// present) one of the same length; with `position_ids`, a first row without `seq_lengths`
/// (pre-packed rows count their positions otherwise). The values themselves are checked while
/// they are written.
fn usual_rows<'py>(
    features: &Bound<'py, PyAny>,
    position_ids: bool,
) -> Option<(Values<'py>, OptionalValues<'py>, Vec<usize>)> {
    let py = features.py();
    let reader = Reader::new(features);
    let first = reader.rows()?.first()?;
    if position_ids && first.contains(intern!(py, "seq_lengths")).unwrap_or(true) {
        return None;
    }
    let ids = reader.values(intern!(py, "input_ids"))?;
    let lengths = ids.token_lengths()?;
    if lengths.contains(&0) {
        return None; // the general path decides what an empty row is
    }
    let labels = reader.optional_values(intern!(py, "labels"))?;
    let label_lengths = labels.values.token_lengths_where(&labels.present)?;
    let fits = label_lengths
        .iter()
        .zip(&lengths)
        .all(|(labels, ids)| labels.is_none_or(|length| length == *ids));
    fits.then_some((ids, labels, lengths))
}

/// The buffers of the batch: input ids, labels, position ids (when asked), attention mask; None
/// when a value is not an exact int in the int64 range, or the batch cannot be padded (the
/// general path reports either).
fn written(
    ids: &Values<'_>,
    labels: &OptionalValues<'_>,
    lengths: &[usize],
    pad_id: i64,
    multiple: Option<usize>,
    position_ids: bool,
) -> Option<(usize, Vec<Vec<i64>>)> {
    let target = pad::target_length("input_ids", lengths, Strategy::Longest, multiple).ok()??;
    let input_ids = ids
        .padded("input_ids", lengths, target, pad_id, false)
        .ok()??;
    // A row without labels takes its input ids (TRL's `example.get("labels", input_ids)`).
    let labels = pad::fill_in_place(
        "labels",
        lengths,
        target,
        -100,
        false,
        |row, out| match labels.present.get(row) {
            Some(true) => labels.values.append_row(row, out, lengths[row]),
            Some(false) => {
                let start = row.checked_mul(target);
                let ids = start.and_then(|s| input_ids.get(s..s.checked_add(lengths[row])?));
                ids.map(|ids| out.extend_from_slice(ids)).is_some()
            }
            None => false,
        },
    )
    .ok()??;
    let mut buffers = vec![input_ids, labels];
    if position_ids {
        buffers.push(pad::position_ids("position_ids", lengths, target).ok()?);
    }
    buffers.push(pad::attention_mask("attention_mask", lengths, target, false).ok()?);
    Some((target, buffers))
}

/// TRL's padded SFT batch of the usual rows (see `usual_rows`): a dict of `input_ids` (padded
/// right with `pad_id`), `labels` (each row's, else its input ids; padded with -100),
/// `position_ids` (with `position_ids`), `attention_mask`, every one a `rows × width` int64
/// matrix passed through `to_tensor` (e.g. `torch.from_numpy`), the width the longest row's
/// length rounded up to `multiple`. None for any other batch, for the caller's general path.
#[pyfunction]
#[pyo3(signature = (features, *, pad_id, multiple, position_ids, to_tensor))]
pub fn pad_with_labels<'py>(
    py: Python<'py>,
    features: &Bound<'py, PyAny>,
    pad_id: i64,
    multiple: Option<usize>,
    position_ids: bool,
    to_tensor: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some((ids, labels, lengths)) = usual_rows(features, position_ids) else {
        return Ok(None);
    };
    let Some((width, buffers)) = written(&ids, &labels, &lengths, pad_id, multiple, position_ids)
    else {
        return Ok(None);
    };
    let mut keys = vec![intern!(py, "input_ids"), intern!(py, "labels")];
    if position_ids {
        keys.push(intern!(py, "position_ids"));
    }
    keys.push(intern!(py, "attention_mask"));
    let batch = PyDict::new(py);
    let direct = torch_tensors::is_torch_from_numpy(to_tensor);
    for (key, values) in keys.into_iter().zip(buffers) {
        let output = Output {
            key: String::new(),
            data: Data::I64(values),
            layout: Layout::Matrix {
                rows: lengths.len(),
                columns: width,
            },
        };
        batch.set_item(
            key,
            torch_tensors::converted(py, output, to_tensor, direct)?,
        )?;
    }
    Ok(Some(batch))
}
