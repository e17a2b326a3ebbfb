//! What the traces draw of the MPI messages matched across ranks ([`crate::classify::mpi`]):
//! each message whose send and receive are both exported links the two calls (a Perfetto flow, a
//! Paraver communication record from the sender's thread to the receiver's).

use super::Exported;
use crate::classify::mpi::{CallKey, LeftOver, Message, Messages};
use crate::classify::streams::clip;
use crate::hash::FxHashMap;
use crate::model::Timeline;

/// Flow ids of MPI messages: the second-highest bit set, so they never meet a launch's or a
/// collective's.
const FLOW_BIT: u64 = 1 << 62;

/// The messages as drawn.
#[derive(Debug, Clone, Default)]
pub struct Drawn {
    /// The messages drawn, by send start.
    pub list: Vec<Message>,
    /// The position in the plan of each drawn message's sender and receiver.
    pub ends: Vec<(usize, usize)>,
    /// Per call (either end): the drawn messages it takes part in.
    by_call: FxHashMap<CallKey, Vec<u32>>,
    /// Messages matched but not drawn: an end lies outside its process's window, or its process
    /// is not exported.
    pub outside: u64,
    /// Sends and receives that make no message.
    pub left_over: LeftOver,
}

impl Drawn {
    /// Matches the messages of `timeline` and keeps those with both ends exported.
    pub fn new(timeline: &Timeline, exported: &[Exported], index: &[Option<u32>]) -> Drawn {
        let messages = Messages::match_all(timeline);
        let mut drawn = Drawn {
            left_over: messages.left_over,
            ..Drawn::default()
        };
        let inside = |(thread, _): CallKey, span: (i64, i64)| {
            let process = timeline.thread(thread).process;
            let position = index[process.index()]? as usize;
            clip(span, exported[position].window).map(|_| position)
        };
        for m in messages.list {
            let ends = inside(m.send, m.send_span).zip(inside(m.recv, m.recv_span));
            let Some(ends) = ends else {
                drawn.outside += 1;
                continue;
            };
            let n = drawn.list.len() as u32;
            for call in [m.send, m.recv] {
                drawn.by_call.entry(call).or_default().push(n);
            }
            drawn.list.push(m);
            drawn.ends.push(ends);
        }
        drawn
    }

    /// The drawn messages a call takes part in (as sender or receiver), by index.
    pub fn of(&self, call: CallKey) -> &[u32] {
        self.by_call.get(&call).map_or(&[], Vec::as_slice)
    }

    /// A message's flow id.
    pub fn flow_id(n: u32) -> u64 {
        FLOW_BIT | u64::from(n)
    }
}
