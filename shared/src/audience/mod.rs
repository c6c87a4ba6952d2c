//! The audience layer: who a notification may reach. Decided before the queue, for a
//! whole batch with one read of profiles and one of suppressions, and checked once more,
//! per claimed batch, just before sending.
//!
//! - [`decide`]: the rules in order; [`quiet`]: quiet hours; [`address`]: how addresses
//!   compare and hash;
//! - [`profiles`]: the only SQL on `recipients` and `recipient_preferences`;
//! - [`suppressions`]: the only SQL on `suppressions` (but the record statement's);
//! - [`unsubscribe`]: signed one-click unsubscribe links; [`erasure`]: forgetting a person.

pub mod address;
pub mod decide;
pub mod erasure;
pub mod profiles;
pub mod quiet;
pub mod suppressions;
pub mod unsubscribe;

pub use decide::{Decision, Facts, Profile, Request, Target, decide};
pub use quiet::QuietHours;
