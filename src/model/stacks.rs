//! The call stacks of CPU samples (`SAMPLING_CALLCHAINS`): each distinct stack held once, as the
//! frames it is made of, innermost (the sampled function) first.

use super::StringId;
use crate::hash::FxHashMap;

/// One distinct call stack of a timeline: an index into [`Stacks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StackId(pub(crate) u32);

impl StackId {
    /// The index into the timeline's stacks.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One frame of a call stack: a function and the module (executable or library) it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Frame {
    /// The function (or the address, when the sampler could not name it).
    pub symbol: StringId,
    /// The module's path.
    pub module: StringId,
}

/// The distinct call stacks of a timeline, frames innermost first.
#[derive(Debug, Default, Clone)]
pub struct Stacks {
    frames: Vec<Frame>,
    /// Per stack, the end of its frames in `frames`.
    ends: Vec<u32>,
    /// The stack of each list of frames interned so far (while a report is read).
    index: FxHashMap<Box<[Frame]>, StackId>,
}

impl Stacks {
    /// The id of the stack made of `frames` (innermost first), added when new.
    pub fn intern(&mut self, frames: &[Frame]) -> StackId {
        if let Some(&id) = self.index.get(frames) {
            return id;
        }
        let id = self.push(frames);
        self.index.insert(frames.into(), id);
        id
    }

    /// Adds a stack without looking for an equal one.
    fn push(&mut self, frames: &[Frame]) -> StackId {
        self.frames.extend_from_slice(frames);
        self.ends.push(self.frames.len() as u32);
        StackId(self.ends.len() as u32 - 1)
    }

    /// The frames of a stack, innermost first.
    pub fn get(&self, id: StackId) -> &[Frame] {
        let start = match id.0 {
            0 => 0,
            i => self.ends[i as usize - 1] as usize,
        };
        &self.frames[start..self.ends[id.index()] as usize]
    }

    /// How many stacks.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Every stack, in id order.
    pub fn iter(&self) -> impl Iterator<Item = &[Frame]> + '_ {
        (0..self.len() as u32).map(|i| self.get(StackId(i)))
    }

    /// Appends `other`'s stacks, their text moved by `text`; returns what `other`'s ids are
    /// moved by.
    pub(crate) fn append(&mut self, other: &Stacks, text: impl Fn(StringId) -> StringId) -> u32 {
        let offset = self.len() as u32;
        let mut moved = Vec::new();
        for stack in other.iter() {
            moved.clear();
            moved.extend(stack.iter().map(|f| Frame {
                symbol: text(f.symbol),
                module: text(f.module),
            }));
            self.push(&moved);
        }
        offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(symbol: u32, module: u32) -> Frame {
        Frame {
            symbol: StringId(symbol),
            module: StringId(module),
        }
    }

    #[test]
    fn equal_stacks_share_an_id_and_read_back_in_order() {
        let mut stacks = Stacks::default();
        let a = stacks.intern(&[frame(1, 9), frame(2, 9)]);
        let b = stacks.intern(&[frame(3, 8)]);
        assert_eq!(stacks.intern(&[frame(1, 9), frame(2, 9)]), a);
        assert_ne!(a, b);
        assert_eq!(stacks.get(a), &[frame(1, 9), frame(2, 9)]);
        assert_eq!(stacks.get(b), &[frame(3, 8)]);
        let mut merged = Stacks::default();
        merged.intern(&[frame(7, 7)]);
        let offset = merged.append(&stacks, |s| StringId(s.0 + 100));
        assert_eq!(offset, 1);
        assert_eq!(merged.get(StackId(2)), &[frame(103, 108)]);
    }
}
