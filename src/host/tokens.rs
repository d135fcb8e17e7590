//! The host's token range, handed out in blocks: one contiguous block per server, as many
//! tokens as its driver uses (a stdio server 3, an HTTP server its pool), first fit.
//!
//! A host that owns its `mio::Poll` has nearly all of `usize`; an embedded host has the range
//! the program gave it, so a full range is an ordinary outcome (`AddServerError::TooManyServers`)
//! and a removed server's block is free for the next one. A token is mapped back to its server
//! by a binary search over the blocks, which are few (one per server).

use std::ops::Range;

use mio::Token;

/// One server's tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    start: usize,
    len: usize,
    /// The server's slab index.
    server: usize,
    /// The server is gone, but something it left (a legacy session's `DELETE`) still uses
    /// a token of the block: nobody else may have it yet.
    retired: bool,
}

/// Who a token belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Owner {
    /// Outside the host's range: the program's own.
    Foreign,
    /// In the range, but no server holds it now (a server removed since the event was
    /// collected, or a token never handed out).
    Vacant,
    /// The server with this slab index.
    Server(usize),
}

/// The blocks handed out within one range.
#[derive(Debug)]
pub(super) struct TokenSpace {
    range: Range<usize>,
    /// Sorted by `start`, never overlapping, all within `range`.
    blocks: Vec<Block>,
}

impl TokenSpace {
    pub(super) fn new(range: Range<usize>) -> Self {
        Self { range, blocks: Vec::new() }
    }

    pub(super) fn range(&self) -> Range<usize> {
        self.range.clone()
    }

    /// The first free run of `len` tokens, or `None` when no gap is that long.
    pub(super) fn find(&self, len: usize) -> Option<Token> {
        let mut cursor = self.range.start;
        for b in &self.blocks {
            if b.start - cursor >= len {
                return Some(Token(cursor));
            }
            cursor = b.start + b.len;
        }
        (self.range.end.saturating_sub(cursor) >= len).then_some(Token(cursor))
    }

    /// Records `tokens` as the block of `server`. `tokens` comes from [`find`](Self::find)
    /// with nothing committed in between.
    pub(super) fn commit(&mut self, tokens: Range<usize>, server: usize) {
        let block = Block { start: tokens.start, len: tokens.len(), server, retired: false };
        debug_assert!(self.range.start <= block.start && tokens.end <= self.range.end);
        let at = self.blocks.partition_point(|b| b.start < block.start);
        debug_assert!(self.blocks.get(at).is_none_or(|b| tokens.end <= b.start));
        self.blocks.insert(at, block);
    }

    /// Frees the block of `server`, if it has one.
    pub(super) fn release(&mut self, server: usize) {
        self.blocks.retain(|b| b.retired || b.server != server);
    }

    /// Keeps the block of removed `server` out of use until
    /// [`release_retired`](Self::release_retired): its tokens belong to no server meanwhile.
    pub(super) fn retire(&mut self, server: usize) {
        if let Some(b) = self.blocks.iter_mut().find(|b| !b.retired && b.server == server) {
            b.retired = true;
        }
    }

    /// Frees the retired block holding `token`, if there is one (a live server's stays).
    #[cfg_attr(not(feature = "http"), allow(dead_code))] // only HTTP servers retire blocks
    pub(super) fn release_retired(&mut self, token: Token) {
        self.blocks.retain(|b| !(b.retired && (b.start..b.start + b.len).contains(&token.0)));
    }

    pub(super) fn owner(&self, token: Token) -> Owner {
        if !self.range.contains(&token.0) {
            return Owner::Foreign;
        }
        let after = self.blocks.partition_point(|b| b.start <= token.0);
        match after.checked_sub(1).and_then(|i| self.blocks.get(i)) {
            Some(b) if token.0 - b.start < b.len && !b.retired => Owner::Server(b.server),
            _ => Owner::Vacant,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(space: &mut TokenSpace, len: usize, server: usize) -> Option<usize> {
        let at = space.find(len)?.0;
        space.commit(at..at + len, server);
        Some(at)
    }

    #[test]
    fn first_fit_fills_the_range_then_refuses() {
        let mut space = TokenSpace::new(10..20);
        assert_eq!(take(&mut space, 3, 0), Some(10));
        assert_eq!(take(&mut space, 3, 1), Some(13));
        assert_eq!(take(&mut space, 3, 2), Some(16));
        assert_eq!(space.find(3), None, "one token left");
        assert_eq!(take(&mut space, 1, 3), Some(19));
        assert_eq!(space.find(1), None);
    }

    #[test]
    fn a_released_block_is_reused_and_too_small_gaps_are_skipped() {
        let mut space = TokenSpace::new(0..12);
        for server in 0..4 {
            take(&mut space, 3, server);
        }
        space.release(1);
        assert_eq!(space.owner(Token(4)), Owner::Vacant);
        assert_eq!(space.find(4), None, "a 3-token gap cannot hold 4");
        assert_eq!(take(&mut space, 3, 7), Some(3), "the freed block comes back");
        assert_eq!(space.owner(Token(4)), Owner::Server(7));
    }

    #[test]
    fn a_retired_block_stays_taken_until_released_and_outlives_its_slab_index() {
        let mut space = TokenSpace::new(0..6);
        take(&mut space, 3, 0);
        take(&mut space, 3, 1);
        space.retire(0);
        assert_eq!(space.owner(Token(1)), Owner::Vacant, "no server holds it");
        assert_eq!(space.find(3), None, "but nobody else gets it");
        space.release(0);
        assert_eq!(space.find(3), None, "a new server at index 0 does not free it either");
        space.release_retired(Token(4));
        assert_eq!(space.owner(Token(4)), Owner::Server(1), "a live server's block stays");
        space.release_retired(Token(2));
        assert_eq!(take(&mut space, 3, 0), Some(0), "free once its user is done");
        assert_eq!(space.owner(Token(1)), Owner::Server(0));
    }

    #[test]
    fn owners_at_the_edges() {
        let mut space = TokenSpace::new(100..110);
        take(&mut space, 3, 5);
        take(&mut space, 3, 6);
        assert_eq!(space.owner(Token(99)), Owner::Foreign);
        assert_eq!(space.owner(Token(110)), Owner::Foreign);
        assert_eq!(space.owner(Token(usize::MAX)), Owner::Foreign);
        assert_eq!(space.owner(Token(100)), Owner::Server(5));
        assert_eq!(space.owner(Token(102)), Owner::Server(5));
        assert_eq!(space.owner(Token(103)), Owner::Server(6));
        assert_eq!(space.owner(Token(105)), Owner::Server(6));
        assert_eq!(space.owner(Token(106)), Owner::Vacant);
        assert_eq!(space.owner(Token(109)), Owner::Vacant);
    }

    #[test]
    fn the_top_of_usize_is_usable_without_overflow() {
        let mut space = TokenSpace::new(usize::MAX - 4..usize::MAX);
        assert_eq!(take(&mut space, 3, 0), Some(usize::MAX - 4));
        assert_eq!(space.find(3), None);
        assert_eq!(space.owner(Token(usize::MAX - 2)), Owner::Server(0));
        assert_eq!(space.owner(Token(usize::MAX - 1)), Owner::Vacant);
    }
}
