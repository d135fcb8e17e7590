//! An "anything to do?" check for host loops that must not enter the kernel for nothing.
//!
//! A loop that calls [`Host::poll`] with `Some(Duration::ZERO)` every frame makes one
//! `epoll_wait` per frame even when no call is pending. [`Host::is_idle`] answers from the
//! engines' and drivers' own state, with one clock read (the vDSO, not a system call): when it
//! says `true`, a zero-timeout poll would only ask the kernel whether a server spoke unasked.
//! It asks the servers something happened to since the last tick; the others count by what
//! the tick filed them as, so an idle server a host keeps costs the question nothing.

use std::time::Instant;

use super::Host;

impl Host {
    /// `true` when a zero-timeout [`poll`](Self::poll) has nothing to do now except ask the
    /// kernel whether a server sent something unasked: no call or handshake is pending, nothing
    /// waits to be written or to be resumed, no event waits for the host, no server needs
    /// starting, no closed server's legacy session is being ended (its `DELETE` moves only when
    /// polled), and no timer is due.
    ///
    /// A loop that polls only when this is `false` makes no system call while nothing is
    /// pending. What a server sends unasked while the loop skips its polls (notifications,
    /// `ping`, `roots/list` and other server requests, the process ending) waits in the pipe or
    /// socket until the next poll: poll now and then anyway, at the rate such messages need an
    /// answer (every few hundred milliseconds is plenty for `ping`).
    ///
    /// ```no_run
    /// # fn frame(host: &mut mcpoll::Host, n: u64) -> std::io::Result<()> {
    /// use std::time::Duration;
    /// if !host.is_idle() || n % 30 == 0 {
    ///     host.poll(Some(Duration::ZERO))?;
    /// }
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn is_idle(&self) -> bool {
        let now = Instant::now();
        // A closed server's session `DELETE` moves only when polled; its exiting process is
        // checked and signalled only by a tick.
        self.ending.is_empty()
            && self.exiting.poll_timeout().is_none_or(|d| d > now)
            && self.client.is_idle_with(now, |index, s| {
                super::embed::is_idle(s, self.transports.get(index).and_then(Option::as_ref), now)
            })
    }
}
