//! Buffers out: the core's outputs handed to numpy arrays or torch tensors without a copy, and
//! outputs written into buffers a caller's provider gives. Nothing here imports `bindings`.

pub mod numpy_arrays;
pub mod output_buffers;
pub mod torch_tensors;
