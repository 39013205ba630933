//! The protocols the engines run, each bound to the seam (`bootsim_core::seam`): how its nodes
//! are built from a case and how its runs are judged and worded.

pub mod nccl;
pub mod nvshmem;

pub use nccl::Nccl;
pub use nvshmem::Nvshmem;
