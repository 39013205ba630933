//! The wire format NVSHMEM's UID bootstrap and NCCL's share (NVSHMEM's descends from NCCL's),
//! byte for byte: host byte order (little-endian), raw structs, every message an `i32` length
//! then its bytes. Both protocol crates frame with it; the interposer peeks headers with it.

mod error;
mod frame;
mod messages;
mod sockaddr;

pub use error::{Fingerprint, RedactedMagic, WireError};
pub use frame::{encode_frame, FrameReader};
pub use messages::{ExtInfo, Preamble, SOCKET_TYPE_BOOTSTRAP};
pub use sockaddr::{decode_sockaddr, encode_sockaddr, SOCKADDR_LEN};
