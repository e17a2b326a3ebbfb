//! Interval algebra on the timeline's nanoseconds, below `classify` and `analysis` (both measure
//! time with it): a set of half-open intervals `[start, end)` kept sorted, disjoint and merged,
//! with union, intersection and difference by linear sweeps.
//!
//! Every analysis measures time through this one type: `|⋃ comm \ ⋃ compute|` is
//! `comm.difference(&compute).measure()`, and how much of one kernel is covered is
//! [`IntervalSet::covered`] (a binary search, not a scan of the set).

/// A sorted set of disjoint, non-touching, non-empty half-open intervals `[start, end)` in ns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntervalSet {
    spans: Vec<(i64, i64)>,
}

impl IntervalSet {
    /// The union of arbitrary intervals (any order, overlapping or not; empty ones are dropped).
    /// Sorts once: O(n log n).
    pub fn from_intervals(intervals: impl IntoIterator<Item = (i64, i64)>) -> IntervalSet {
        let mut spans: Vec<(i64, i64)> = intervals.into_iter().filter(|(s, e)| s < e).collect();
        spans.sort_unstable();
        IntervalSet {
            spans: merge_sorted(spans),
        }
    }

    /// The merged intervals, in order.
    pub fn spans(&self) -> &[(i64, i64)] {
        &self.spans
    }

    /// Whether the set covers nothing.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Total covered length, ns.
    pub fn measure(&self) -> i64 {
        self.spans.iter().map(|(s, e)| e - s).sum()
    }

    /// The first start and last end, when the set is not empty.
    pub fn extent(&self) -> Option<(i64, i64)> {
        Some((self.spans.first()?.0, self.spans.last()?.1))
    }

    /// `|[start, end) ∩ self|`: how much of one interval the set covers. O(log n + k) for the k
    /// set intervals it meets.
    pub fn covered(&self, start: i64, end: i64) -> i64 {
        if start >= end {
            return 0;
        }
        let first = self.spans.partition_point(|&(_, e)| e <= start);
        self.spans[first..]
            .iter()
            .take_while(|&&(s, _)| s < end)
            .map(|&(s, e)| e.min(end) - s.max(start))
            .sum()
    }

    /// The parts of `[start, end)` the set does not cover, in order. O(log n + k) for the k
    /// set intervals it meets.
    pub fn gaps_within(&self, start: i64, end: i64) -> impl Iterator<Item = (i64, i64)> + '_ {
        let first = self.spans.partition_point(|&(_, e)| e <= start);
        let mut meeting = self.spans[first..]
            .iter()
            .take_while(move |&&(s, _)| s < end);
        let mut from = start;
        std::iter::from_fn(move || {
            while from < end {
                let gap = match meeting.next() {
                    Some(&(s, e)) => {
                        let gap = (from, s.min(end));
                        from = from.max(e);
                        gap
                    }
                    None => (std::mem::replace(&mut from, end), end),
                };
                if gap.0 < gap.1 {
                    return Some(gap);
                }
            }
            None
        })
    }

    /// `self ∪ other`, by one merge of both.
    pub fn union(&self, other: &IntervalSet) -> IntervalSet {
        let (a, b) = (&self.spans, &other.spans);
        let mut spans = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            if j == b.len() || (i < a.len() && a[i] <= b[j]) {
                spans.push(a[i]);
                i += 1;
            } else {
                spans.push(b[j]);
                j += 1;
            }
        }
        IntervalSet {
            spans: merge_sorted(spans),
        }
    }

    /// `self ∩ other`, by one sweep over both.
    pub fn intersection(&self, other: &IntervalSet) -> IntervalSet {
        let mut spans = Vec::new();
        // Spans that end before the other set's first start meet nothing: skip them, so that
        // a small set (a step) meets a large one at the cost of its own size.
        let (mut i, mut j) = (self.skip_to(other), other.skip_to(self));
        while i < self.spans.len() && j < other.spans.len() {
            let (a, b) = (self.spans[i], other.spans[j]);
            let (s, e) = (a.0.max(b.0), a.1.min(b.1));
            if s < e {
                spans.push((s, e));
            }
            if a.1 <= b.1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        IntervalSet { spans }
    }

    /// `self \ other`, by one sweep over both.
    pub fn difference(&self, other: &IntervalSet) -> IntervalSet {
        let mut spans = Vec::new();
        let mut j = other.skip_to(self);
        for &(start, end) in &self.spans {
            let mut s = start;
            while j < other.spans.len() && other.spans[j].1 <= s {
                j += 1;
            }
            let mut k = j;
            while s < end && k < other.spans.len() && other.spans[k].0 < end {
                let (cut_start, cut_end) = other.spans[k];
                if cut_start > s {
                    spans.push((s, cut_start));
                }
                s = s.max(cut_end);
                k += 1;
            }
            if s < end {
                spans.push((s, end));
            }
        }
        IntervalSet { spans }
    }

    /// How many of its spans end before `other`'s first span starts (all of them meet
    /// nothing of `other`), by binary search.
    fn skip_to(&self, other: &IntervalSet) -> usize {
        match other.spans.first() {
            Some(&(first, _)) => self.spans.partition_point(|&(_, end)| end <= first),
            None => 0,
        }
    }
}

/// Intervals handed over in start order, joined into stretches (those that overlap or touch)
/// in constant memory: each stretch is given back once a later interval starts after it
/// ([`Stretches::add`]), the last one at [`Stretches::finish`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Stretches {
    open: Option<(i64, i64)>,
}

impl Stretches {
    /// Adds `[start, end)` (nothing when empty; its start no earlier than the last one's);
    /// the stretch it closes, if any.
    pub fn add(&mut self, (start, end): (i64, i64)) -> Option<(i64, i64)> {
        if start >= end {
            return None;
        }
        debug_assert!(
            self.open.is_none_or(|open| open.0 <= start),
            "in start order"
        );
        match &mut self.open {
            Some(open) if start <= open.1 => {
                open.1 = open.1.max(end);
                None
            }
            open => open.replace((start, end)),
        }
    }

    /// The last stretch, if any.
    pub fn finish(self) -> Option<(i64, i64)> {
        self.open
    }
}

/// The measure of the union of intervals handed over in start order, in constant memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct UnionMeasure {
    stretches: Stretches,
    closed: i64,
}

impl UnionMeasure {
    /// Adds `[start, end)`, its start no earlier than the last one's.
    pub fn add(&mut self, span: (i64, i64)) {
        if let Some((s, e)) = self.stretches.add(span) {
            self.closed += e - s;
        }
    }

    /// The measure of the union of everything added.
    pub fn measure(self) -> i64 {
        self.closed + self.stretches.finish().map_or(0, |(s, e)| e - s)
    }
}

/// Intervals gathered one at a time into an [`IntervalSet`]: one that meets the last one
/// gathered joins it at once, so that operations arriving in start order (a stream's kernels, a
/// busy GPU's back-to-back kernels) take the memory of their union, not of their number.
#[derive(Debug, Clone, Default)]
pub struct Gathered {
    spans: Vec<(i64, i64)>,
}

impl Gathered {
    /// Adds `[start, end)` (nothing when empty).
    pub fn add(&mut self, (start, end): (i64, i64)) {
        if start >= end {
            return;
        }
        match self.spans.last_mut() {
            Some(last) if start <= last.1 && end >= last.0 => {
                *last = (last.0.min(start), last.1.max(end));
            }
            _ => self.spans.push((start, end)),
        }
    }

    /// The union of everything added.
    pub fn finish(self) -> IntervalSet {
        IntervalSet::from_intervals(self.spans)
    }
}

/// Merges intervals sorted by start; touching intervals become one.
fn merge_sorted(sorted: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(sorted.len());
    for (s, e) in sorted {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(spans: &[(i64, i64)]) -> IntervalSet {
        IntervalSet::from_intervals(spans.iter().copied())
    }

    #[test]
    fn gathering_one_at_a_time_gives_the_union() {
        let spans = [
            (5, 9),
            (9, 12),
            (0, 3),
            (2, 6),
            (20, 20),
            (15, 18),
            (11, 16),
            (30, 31),
        ];
        let mut gathered = Gathered::default();
        for &span in &spans {
            gathered.add(span);
        }
        // Back-to-back spans took one slot each time they met the last one.
        assert_eq!(gathered.spans.len(), 4);
        assert_eq!(gathered.finish(), set(&spans));
    }

    /// Membership of every integer point, the definition the sweeps must agree with.
    fn points(s: &IntervalSet, range: std::ops::Range<i64>) -> Vec<bool> {
        range
            .map(|t| s.spans().iter().any(|&(a, b)| a <= t && t < b))
            .collect()
    }

    #[test]
    fn union_merges_overlapping_and_touching_intervals_and_drops_empty_ones() {
        let s = set(&[(5, 8), (0, 2), (1, 3), (3, 4), (10, 10), (9, 12)]);
        assert_eq!(s.spans(), &[(0, 4), (5, 8), (9, 12)]);
        assert_eq!(s.measure(), 4 + 3 + 3);
        assert_eq!(s.extent(), Some((0, 12)));
    }

    #[test]
    fn covered_counts_only_the_part_inside() {
        let s = set(&[(0, 4), (5, 8), (9, 12)]);
        assert_eq!(s.covered(2, 10), 2 + 3 + 1);
        assert_eq!(s.covered(4, 5), 0);
        assert_eq!(s.covered(-5, 100), 10);
        assert_eq!(s.covered(7, 7), 0);
        assert_eq!(IntervalSet::default().covered(0, 10), 0);
    }

    #[test]
    fn stretches_in_start_order_measure_the_union() {
        let spans = [
            (0, 3),
            (2, 6),
            (5, 9),
            (9, 12),
            (11, 16),
            (15, 18),
            (20, 20),
            (30, 31),
        ];
        let mut stretches = Stretches::default();
        let closed: Vec<_> = spans.iter().filter_map(|&s| stretches.add(s)).collect();
        assert_eq!(closed, [(0, 18)]);
        assert_eq!(stretches.finish(), Some((30, 31)));
        let mut union = UnionMeasure::default();
        spans.iter().for_each(|&s| union.add(s));
        assert_eq!(union.measure(), set(&spans).measure());
        assert_eq!(UnionMeasure::default().measure(), 0);
    }

    #[test]
    fn gaps_within_are_what_the_set_leaves_of_one_interval() {
        let s = set(&[(0, 4), (5, 8), (9, 12)]);
        let gaps = |a, b| s.gaps_within(a, b).collect::<Vec<_>>();
        assert_eq!(gaps(2, 10), [(4, 5), (8, 9)]);
        assert_eq!(gaps(-3, 14), [(-3, 0), (4, 5), (8, 9), (12, 14)]);
        assert_eq!(gaps(1, 3), []);
        assert_eq!(gaps(6, 6), []);
        assert_eq!(gaps(12, 20), [(12, 20)]);
        assert_eq!(
            IntervalSet::default().gaps_within(1, 2).collect::<Vec<_>>(),
            [(1, 2)]
        );
        for (a, b) in [(2, 10), (-3, 14), (4, 9), (0, 12)] {
            let whole: Vec<(i64, i64)> = set(&[(a, b)]).difference(&s).spans().to_vec();
            assert_eq!(gaps(a, b), whole);
        }
    }

    #[test]
    fn set_operations_agree_with_pointwise_membership() {
        // Pseudo-random sets, checked point by point against the definition.
        let mut x = 12345u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 60) as i64
        };
        for _ in 0..200 {
            let a: Vec<(i64, i64)> = (0..6).map(|_| (next(), next())).collect();
            let b: Vec<(i64, i64)> = (0..6).map(|_| (next(), next())).collect();
            let (a, b) = (set(&a), set(&b));
            let (pa, pb) = (points(&a, 0..60), points(&b, 0..60));
            let zip = |f: fn(bool, bool) -> bool| -> Vec<bool> {
                pa.iter().zip(&pb).map(|(&x, &y)| f(x, y)).collect()
            };
            assert_eq!(points(&a.union(&b), 0..60), zip(|x, y| x || y));
            assert_eq!(points(&a.intersection(&b), 0..60), zip(|x, y| x && y));
            assert_eq!(points(&a.difference(&b), 0..60), zip(|x, y| x && !y));
            let inter = zip(|x, y| x && y).iter().filter(|&&v| v).count() as i64;
            let covered: i64 = a.spans().iter().map(|&(s, e)| b.covered(s, e)).sum();
            assert_eq!(covered, inter);
            for merged in [a.union(&b), a.intersection(&b), a.difference(&b)] {
                assert!(merged.spans().windows(2).all(|w| w[0].1 < w[1].0));
                assert!(merged.spans().iter().all(|(s, e)| s < e));
            }
        }
    }
}
