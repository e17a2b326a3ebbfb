//! Third step of the data flow: what the timeline's parts are. Which process is which rank
//! ([`ranks`]), which slice of time is steady state ([`window`]), what each CUDA stream does and
//! what each NCCL kernel is for ([`streams`], with the rule table in [`rules`]).
//!
//! The analyses and the exporters read these results; none re-derives them, so a table and a
//! picture always agree.

pub mod activity;
pub mod comm;
pub mod enclosing;
pub mod families;
pub mod flops;
pub mod inputs;
pub mod label;
pub mod layout;
pub mod mpi;
pub mod nccl_calls;
pub mod operators;
pub mod payloads;
pub mod peaks;
pub mod precision;
pub mod ranks;
pub mod rules;
pub mod streams;
pub mod window;

pub use activity::Activity;
pub use label::{AxisCoord, RankLabel};
pub use ranks::{Rank, RankSource};
pub use rules::{Purpose, RoleRules, Stage};
pub use streams::{CommKernel, Evidence, RankStreams, Role, StreamUse};
pub use window::{Window, WindowSource, WindowSpec};
