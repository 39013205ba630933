//! How an error is stated in a run record ([`crate::RunRecord`]): the text the oracle's
//! findings carry, the same in every world.

/// A real world's init failure as its finding states it: led by `init: ` unless it says so.
/// (Simulated worlds state a protocol's typed error as it is.)
pub fn init_text(text: String) -> String {
    if text.starts_with("init") {
        text
    } else {
        format!("init: {text}")
    }
}
