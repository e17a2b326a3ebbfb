//! The hasher used by every map and set of the crate, chosen once: keys are small integers and
//! interned text from trusted local files, so a fast non-cryptographic hash is right.

pub use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet, FxHasher};
