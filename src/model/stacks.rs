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

/// The file name of a module's path (`/usr/lib64/libcuda.so.1`: `libcuda.so.1`); a module
/// named without a path (`[kernel.kallsyms]`) as it is.
pub fn module_file(module: &str) -> &str {
    module.rsplit('/').next().unwrap_or(module)
}

/// What a CPU sample is counted for, when samples are counted by the function they hit
/// ([`Frame::hit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hit {
    /// The innermost frame with a function's name.
    Function(StringId),
    /// No frame has a name: the module of the innermost frame whose module is known.
    Module(StringId),
    /// Neither: the innermost frame's address.
    Address(StringId),
}

impl Frame {
    /// What a sample of `stack` (innermost first) hit: the innermost function the sampler
    /// named (an address, `0x...`, is not a name, nor one of nsys's markers for a stack it
    /// could not walk to its end, `[Broken backtraces]` and `[Max depth]`, whose symbol and
    /// module are both the marker); else the innermost module
    /// that is known (not `[Unknown]` nor a marker: `[kernel.kallsyms]`, `libcuda.so.1`, so
    /// that the unnamed addresses of one library count together); else the innermost address.
    /// None for a stack of markers only, or none.
    pub fn hit<'t>(stack: &[Frame], text: impl Fn(StringId) -> &'t str) -> Option<Hit> {
        let marker = |f: &Frame| {
            let symbol = text(f.symbol);
            symbol.starts_with('[') && symbol == text(f.module)
        };
        let named = |f: &&Frame| !marker(f) && !text(f.symbol).starts_with("0x");
        let known = |f: &&Frame| !marker(f) && text(f.module) != "[Unknown]";
        if let Some(f) = stack.iter().find(named) {
            return Some(Hit::Function(f.symbol));
        }
        if let Some(f) = stack.iter().find(known) {
            return Some(Hit::Module(f.module));
        }
        let address = stack.iter().find(|f| !marker(f));
        address.map(|f| Hit::Address(f.symbol))
    }
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

    /// A sample's hit, on frames as nsys writes them (fs24's `ault42_pid337171`: a kernel
    /// leaf in `[kernel.kallsyms]`, user addresses in `[Unknown]`, the `[Broken backtraces]`
    /// marker at the root; rodinia's `[Max depth]`).
    #[test]
    fn a_sample_hits_its_innermost_name_else_module_else_address() {
        let texts = [
            "0xffffffff95f305e9",
            "[kernel.kallsyms]",
            "0x1555513e05a5",
            "[Unknown]",
            "[Broken backtraces]",
            "__libc_recv",
            "/usr/lib64/libc.so.6",
            "[Max depth]",
        ];
        let text = |s: StringId| texts[s.0 as usize];
        let kernel = frame(0, 1);
        let user = frame(2, 3);
        let broken = frame(4, 4);
        let recv = frame(5, 6);
        let hit = |stack: &[Frame]| Frame::hit(stack, text);
        assert_eq!(
            hit(&[kernel, recv, broken]),
            Some(Hit::Function(StringId(5)))
        );
        assert_eq!(hit(&[kernel, user, broken]), Some(Hit::Module(StringId(1))));
        assert_eq!(hit(&[user, broken]), Some(Hit::Address(StringId(2))));
        assert_eq!(hit(&[frame(7, 7), user]), Some(Hit::Address(StringId(2))));
        assert_eq!(hit(&[broken]), None);
        assert_eq!(hit(&[]), None);
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
