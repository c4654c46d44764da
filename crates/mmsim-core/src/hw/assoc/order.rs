//! Each set's recency order: a narrow set's as a list of 4-bit way numbers (`NibbleList`), a
//! set of up to 25 ways as a list of 5-bit ones (`QuintList`: the 20- and 24-way LLCs of
//! Intel's server parts), a wider set's as a chain of its ways (`Chain`, `Link`), and the
//! operations of `SetAssoc` that change it.

use super::{Replacement, SetAssoc, SetRef, INVALID, NONE};

/// A set's valid ways from most to least recent as packed way numbers of `$bits` bits, at
/// most `$fields` of them, in one word of type `$word` beside a valid mask of type `$valid`:
/// `NibbleList` (4 bits, up to 16 ways) and `QuintList` (5 bits, up to 25) are this one list
/// at two widths.
macro_rules! way_list {
    ($(#[$doc:meta])* $name:ident, $word:ty, $valid:ty, $bits:expr, $fields:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub(super) struct $name {
            /// The way numbers, most recent (`order & MASK`) first: the first
            /// `valid.count_ones()` fields count, the rest is left over from earlier orders.
            pub(super) order: $word,
            /// A bit per valid way.
            pub(super) valid: $valid,
        }

        impl $name {
            /// A field's bits.
            pub(super) const MASK: $word = (1 << $bits) - 1;
            /// One in the lowest bit of every field.
            const ONES: $word = {
                let (mut x, mut i) = (0, 0u32);
                while i < $fields as u32 {
                    x |= 1 << ($bits * i);
                    i += 1;
                }
                x
            };

            /// The low `k` fields set (all of the word from `$fields` on).
            #[inline(always)]
            fn low(k: u32) -> $word {
                if k >= $fields as u32 {
                    <$word>::MAX
                } else {
                    (1 << ($bits * k)) - 1
                }
            }

            /// Position of the first field equal to `w` (a valid way: it is in the list).
            #[inline(always)]
            fn position(&self, w: $word) -> u32 {
                let x = self.order ^ w.wrapping_mul(Self::ONES);
                // The lowest zero field of x (borrows only produce false zeros above it).
                (x.wrapping_sub(Self::ONES) & !x & (Self::ONES << ($bits - 1))).trailing_zeros() / $bits
            }

            /// Make valid way `w` the most recent: the ways before it move back one, those
            /// after it stay.
            #[inline(always)]
            pub(super) fn promote(&mut self, w: $word) {
                let p = self.position(w);
                self.order = (self.order & !Self::low(p + 1)) | ((self.order & Self::low(p)) << $bits) | w;
            }

            /// Way `w`, not in the list or its last valid way, becomes the most recent: every
            /// valid way before it is one step older (the last one, if `w`, falls off the
            /// counted list).
            #[inline(always)]
            pub(super) fn push(&mut self, w: $word) {
                self.valid |= 1 << w;
                self.order = (self.order << $bits) | w;
            }

            /// Valid way `w` leaves the list: the ways after it move up one.
            #[inline(always)]
            pub(super) fn remove(&mut self, w: $word) {
                let p = self.position(w);
                self.order = (self.order & Self::low(p)) | ((self.order >> $bits) & !Self::low(p));
                self.valid &= !(1 << w);
            }

            /// The way at position `p` (0: the most recent).
            #[inline(always)]
            pub(super) fn at(&self, p: u32) -> usize {
                ((self.order >> ($bits * p)) & Self::MASK) as usize
            }
        }
    };
}

/// Sets of up to this many ways keep their recency order as a list of 5-bit way numbers.
pub(super) const QUINT_WAYS: usize = 25;

way_list!(
    /// A narrow set's valid ways from most to least recent, four bits each.
    NibbleList, u64, u16, 4, 16
);

way_list!(
    /// A set of 17 to 25 ways: its valid ways from most to least recent, five bits each in one
    /// word (one host line holds it, where a chain's links span three).
    QuintList, u128, u32, 5, QUINT_WAYS
);

impl NibbleList {
    /// The way a miss takes in a set whose valid mask when full is `full` (with
    /// `last_shift`, the least recent nibble's shift): the lowest empty way, counted in
    /// `len`, or the least recent one, made the most recent.
    #[inline(always)]
    pub(super) fn take_way(&mut self, full: u16, last_shift: u32, len: &mut usize) -> u64 {
        let w = if self.valid != full {
            let w = (!self.valid).trailing_zeros() as u64;
            self.valid |= 1 << w;
            *len += 1;
            w
        } else {
            (self.order >> last_shift) & Self::MASK
        };
        self.order = (self.order << 4) | w;
        w
    }
}

/// A wide set's valid ways from most to least recent: a doubly linked list through `links`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Chain {
    /// The most recent way (NONE when the set is empty).
    pub(super) head: u32,
    /// The least recent way.
    pub(super) tail: u32,
    /// Valid ways.
    pub(super) n: u32,
}

/// A way's neighbours in its set's chain (NONE at either end).
#[derive(Clone, Copy, Debug)]
pub(super) struct Link {
    pub(super) newer: u32,
    pub(super) older: u32,
}

pub(super) const EMPTY_CHAIN: Chain = Chain { head: NONE, tail: NONE, n: 0 };

impl SetAssoc {
    /// Way `w` of a wide set leaves its chain.
    #[inline(always)]
    pub(super) fn unlink(&mut self, s: SetRef, w: u32) {
        let Link { newer, older } = self.links[s.base + w as usize];
        let c = &mut self.chains[s.set];
        match newer {
            NONE => c.head = older,
            n => self.links[s.base + n as usize].older = older,
        }
        match older {
            NONE => c.tail = newer,
            o => self.links[s.base + o as usize].newer = newer,
        }
    }

    /// Way `w` of a wide set joins its chain as the most recent.
    #[inline(always)]
    pub(super) fn link_first(&mut self, s: SetRef, w: u32) {
        let c = &mut self.chains[s.set];
        let head = std::mem::replace(&mut c.head, w);
        match head {
            NONE => c.tail = w,
            h => self.links[s.base + h as usize].newer = w,
        }
        self.links[s.base + w as usize] = Link { newer: NONE, older: head };
    }

    /// Make lane `i` of set `s` the most recent: the entries more recent than it (every valid
    /// one when `i` was empty) become one step older. `last`: `i` is empty or the set's least
    /// recent way (an insertion's victim under LRU or FIFO).
    #[inline(always)]
    pub(super) fn promote(&mut self, s: SetRef, i: usize, last: bool) {
        let w = i - s.base;
        if self.nibbles {
            let l = self.list(s);
            if last || l.valid & (1 << w) == 0 {
                l.push(w as u64);
            } else {
                l.promote(w as u64);
            }
            return;
        }
        if self.quints {
            let l = &mut self.qlists[s.set];
            if last || l.valid & (1 << w) == 0 {
                l.push(w as u128);
            } else {
                l.promote(w as u128);
            }
            return;
        }
        let w = w as u32;
        if self.tags()[i] == INVALID {
            self.chains[s.set].n += 1;
        } else if self.chains[s.set].head == w {
            return;
        } else {
            self.unlink(s, w);
        }
        self.link_first(s, w);
    }

    /// A hit under LRU refreshes the entry's recency.
    #[inline(always)]
    pub(super) fn touch(&mut self, s: SetRef, i: usize) {
        if self.policy == Replacement::Lru {
            self.promote(s, i, false);
        }
    }

    /// Empty lane `i` of set `s`: the entries less recent than it become one step more recent.
    pub(super) fn remove(&mut self, s: SetRef, i: usize) {
        let w = i - s.base;
        if self.nibbles {
            self.lists[s.set].remove(w as u64);
        } else if self.quints {
            self.qlists[s.set].remove(w as u128);
        } else {
            self.unlink(s, w as u32);
            self.chains[s.set].n -= 1;
        }
        self.store_key(s.set, i, INVALID);
        self.len -= 1;
    }

    /// The valid ways of set `s`, most recent first.
    pub(super) fn recency_order(&self, s: SetRef) -> Vec<usize> {
        if self.nibbles {
            let l = self.lists[s.set];
            return (0..l.valid.count_ones()).map(|p| s.base + l.at(p)).collect();
        }
        if self.quints {
            let l = self.qlists[s.set];
            return (0..l.valid.count_ones()).map(|p| s.base + l.at(p)).collect();
        }
        let mut v = Vec::new();
        let mut w = self.chains[s.set].head;
        while w != NONE {
            v.push(s.base + w as usize);
            w = self.links[s.base + w as usize].older;
        }
        v
    }
}
