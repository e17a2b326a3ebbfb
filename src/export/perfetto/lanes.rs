//! Lanes: sibling tracks (the first named as the track, the others `NAME · lane N`) that
//! together hold events a single track could not (one slice stack per track). GPU streams use strict lanes (an operation only goes where the lane
//! is idle); CPU threads and NVTX tracks use nesting lanes (a slice may also go inside the lane's
//! innermost open slice when it ends within it).

use super::sequence::{PacketStream, Sequence};
use std::io::{self, Write};

/// Deepest nesting on one lane; deeper slices open another lane (trace_processor stops at 512).
const MAX_DEPTH: usize = 256;

/// One lane: its sequence and the ends of its open slices, innermost last.
struct Lane {
    sequence: Sequence,
    open: Vec<u64>,
}

/// The lanes of one logical track.
pub struct Lanes {
    lanes: Vec<Lane>,
    nest: bool,
}

impl Lanes {
    /// No lanes yet; `nest` allows slices inside open ones.
    pub fn new(nest: bool) -> Lanes {
        Lanes {
            lanes: Vec::new(),
            nest,
        }
    }

    /// Closes, on every lane, the slices that ended by `start`, and returns the first lane where
    /// `[start, end]` fits, or None when a new lane is needed.
    pub fn place<W: Write>(
        &mut self,
        out: &mut PacketStream<W>,
        start: u64,
        end: u64,
    ) -> io::Result<Option<usize>> {
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            close_until(lane, out, start)?;
            let fits = match lane.open.last() {
                None => true,
                Some(&open_end) => self.nest && end <= open_end && lane.open.len() < MAX_DEPTH,
            };
            if fits {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// The first lane after closing its slices that ended by `ts` (for instants), if any.
    pub fn first<W: Write>(&mut self, out: &mut PacketStream<W>, ts: u64) -> io::Result<bool> {
        match self.lanes.first_mut() {
            Some(lane) => close_until(lane, out, ts).map(|_| true),
            None => Ok(false),
        }
    }

    /// Adds a lane; returns its index.
    pub fn add(&mut self, sequence: Sequence) -> usize {
        self.lanes.push(Lane {
            sequence,
            open: Vec::new(),
        });
        self.lanes.len() - 1
    }

    /// How many lanes there are.
    pub fn len(&self) -> usize {
        self.lanes.len()
    }

    /// The lane's sequence, to write a slice's BEGIN (then [`Lanes::opened`]) or an instant.
    pub fn sequence(&mut self, lane: usize) -> &mut Sequence {
        &mut self.lanes[lane].sequence
    }

    /// Records that a slice ending at `end` was opened on `lane`.
    pub fn opened(&mut self, lane: usize, end: u64) {
        self.lanes[lane].open.push(end);
    }

    /// Closes every open slice.
    pub fn finish<W: Write>(&mut self, out: &mut PacketStream<W>) -> io::Result<()> {
        for lane in &mut self.lanes {
            close_until(lane, out, u64::MAX)?;
        }
        Ok(())
    }
}

/// Writes the END of every open slice of `lane` that ends by `t`, innermost first.
fn close_until<W: Write>(lane: &mut Lane, out: &mut PacketStream<W>, t: u64) -> io::Result<()> {
    while let Some(&end) = lane.open.last() {
        if end > t {
            break;
        }
        lane.open.pop();
        lane.sequence.end(out, end)?;
    }
    Ok(())
}
