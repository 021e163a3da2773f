//! Reading Python rows in: the one reader of a batch's rows (`reader`: each value classified
//! once, a strict route straight into padded buffers and a lax route into core columns), the
//! readers of Python int lists, numpy arrays and torch tensors it uses, and the pad plan from a
//! collator's settings. Nothing here imports `bindings`.

pub mod array_values;
pub mod collate_rows;
pub mod dlpack;
pub mod gather;
pub mod ints;
pub mod pad_plan;
pub mod read;
pub mod reader;
pub mod tensor_concat;
pub mod tensor_ints;
pub mod torch;
