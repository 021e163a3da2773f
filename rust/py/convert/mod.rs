//! Reading Python rows in: row values into core columns, Python int lists, numpy arrays and
//! torch tensors read in place, pad groups read straight into padded buffers, and the pad plan
//! from a collator's settings. Nothing here imports `bindings`.

pub mod array_values;
pub mod dlpack;
pub mod gather;
pub mod in_place;
pub mod ints;
pub mod pad_plan;
pub mod read;
pub mod reader;
pub mod rows;
pub mod tensor_concat;
pub mod tensor_ints;
pub mod torch;
