//! The notification's enumerations: channel, priority and status. Each has one spelling on
//! the wire (serde), one in the database (`ToSql`/`FromSql`) and one in logs (`as_str`); a
//! value read from the database that is not one of them is an error, never a default.

use std::error::Error;

use bytes::BytesMut;
use serde::{Deserialize, Serialize};
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

/// The longest recipient address, in characters.
pub const RECIPIENT_MAX: usize = 320;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Channel {
    Email,
    Sms,
    Push,
}

impl Channel {
    pub const ALL: [Channel; 3] = [Channel::Email, Channel::Sms, Channel::Push];

    /// Its position in [`Channel::ALL`], for arrays kept per channel.
    pub fn index(self) -> usize {
        match self {
            Channel::Email => 0,
            Channel::Sms => 1,
            Channel::Push => 2,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Email => "EMAIL",
            Channel::Sms => "SMS",
            Channel::Push => "PUSH",
        }
    }
}

/// Stored as a small integer so that ascending order is claim order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Priority {
    High = 0,
    Normal = 1,
    Low = 2,
}

impl Priority {
    pub const ALL: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];

    pub fn as_str(self) -> &'static str {
        match self {
            Priority::High => "HIGH",
            Priority::Normal => "NORMAL",
            Priority::Low => "LOW",
        }
    }

    /// The stored rank: 0 is claimed first.
    pub fn rank(self) -> i16 {
        self as i16
    }

    pub fn from_rank(rank: i16) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.rank() == rank)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Pending,
    Processing,
    Sent,
    Failed,
    DeadLettered,
    Cancelled,
    /// Never to be sent: the audience rules said no (see [`SuppressionReason`]).
    Suppressed,
    /// Not handed to the provider before its `expiresAt`.
    Expired,
}

impl Status {
    pub const ALL: [Status; 8] = [
        Status::Pending,
        Status::Processing,
        Status::Sent,
        Status::Failed,
        Status::DeadLettered,
        Status::Cancelled,
        Status::Suppressed,
        Status::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "PENDING",
            Status::Processing => "PROCESSING",
            Status::Sent => "SENT",
            Status::Failed => "FAILED",
            Status::DeadLettered => "DEAD_LETTERED",
            Status::Cancelled => "CANCELLED",
            Status::Suppressed => "SUPPRESSED",
            Status::Expired => "EXPIRED",
        }
    }

    /// Nothing automatic leaves a final status.
    pub fn is_final(self) -> bool {
        !matches!(self, Status::Pending | Status::Processing)
    }
}

/// The traffic class: transactional (one recipient, triggered by an event, latency
/// sensitive) or bulk (campaigns). Bulk never takes the part of a channel's rate reserved
/// for transactional traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Class {
    Transactional,
    Bulk,
}

impl Class {
    pub const ALL: [Class; 2] = [Class::Transactional, Class::Bulk];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Transactional => "TRANSACTIONAL",
            Class::Bulk => "BULK",
        }
    }
}

/// Why a notification is SUPPRESSED, in the order the rules are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SuppressionReason {
    /// Its recipient profile has no address for the channel (or does not exist).
    NoAddress,
    /// The address is on the suppression list.
    SuppressedAddress,
    /// Bulk traffic to a person who unsubscribed from everything.
    Unsubscribed,
    /// The person opted out of the category on the channel.
    CategoryOptOut,
}

impl SuppressionReason {
    pub const ALL: [SuppressionReason; 4] = [
        SuppressionReason::NoAddress,
        SuppressionReason::SuppressedAddress,
        SuppressionReason::Unsubscribed,
        SuppressionReason::CategoryOptOut,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SuppressionReason::NoAddress => "NO_ADDRESS",
            SuppressionReason::SuppressedAddress => "SUPPRESSED_ADDRESS",
            SuppressionReason::Unsubscribed => "UNSUBSCRIBED",
            SuppressionReason::CategoryOptOut => "CATEGORY_OPT_OUT",
        }
    }
}

/// The names of `all`, comma-separated: the wording of "must be one of" messages.
pub fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> String {
    all.iter().map(|v| name(*v)).collect::<Vec<_>>().join(", ")
}

/// `parse` (exact spelling) and the text `ToSql`/`FromSql` of an enumeration stored as text.
macro_rules! text_enum {
    ($type:ident, $what:literal) => {
        impl $type {
            /// The value spelled exactly `text`, if any.
            pub fn parse(text: &str) -> Option<Self> {
                Self::ALL.into_iter().find(|v| v.as_str() == text)
            }
        }

        impl<'a> FromSql<'a> for $type {
            fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn Error + Sync + Send>> {
                let text = <&str as FromSql>::from_sql(ty, raw)?;
                $type::parse(text).ok_or_else(|| {
                    format!(concat!("unknown ", $what, " {:?} in the database"), text).into()
                })
            }

            fn accepts(ty: &Type) -> bool {
                <&str as FromSql>::accepts(ty)
            }
        }

        impl ToSql for $type {
            fn to_sql(
                &self,
                ty: &Type,
                out: &mut BytesMut,
            ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
                self.as_str().to_sql(ty, out)
            }

            fn accepts(ty: &Type) -> bool {
                <&str as ToSql>::accepts(ty)
            }

            to_sql_checked!();
        }
    };
}

text_enum!(Channel, "channel");
text_enum!(Status, "status");
text_enum!(Class, "class");
text_enum!(SuppressionReason, "suppression reason");

impl Priority {
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == text)
    }
}

impl<'a> FromSql<'a> for Priority {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn Error + Sync + Send>> {
        let rank = i16::from_sql(ty, raw)?;
        Priority::from_rank(rank)
            .ok_or_else(|| format!("unknown priority rank {rank} in the database").into())
    }

    fn accepts(ty: &Type) -> bool {
        <i16 as FromSql>::accepts(ty)
    }
}

impl ToSql for Priority {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        self.rank().to_sql(ty, out)
    }

    fn accepts(ty: &Type) -> bool {
        <i16 as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_serde() {
        for status in Status::ALL {
            assert_eq!(Status::parse(status.as_str()), Some(status));
            let json = serde_json::to_string(&status).expect("serialise");
            assert_eq!(json, format!("\"{}\"", status.as_str()));
        }
        for priority in Priority::ALL {
            assert_eq!(Priority::from_rank(priority.rank()), Some(priority));
            assert_eq!(Priority::parse(priority.as_str()), Some(priority));
        }
        for channel in Channel::ALL {
            assert_eq!(Channel::parse(channel.as_str()), Some(channel));
        }
        assert_eq!(Status::parse("pending"), None);
        assert_eq!(Priority::from_rank(3), None);
    }

    #[test]
    fn priority_order_is_claim_order() {
        assert!(Priority::High < Priority::Normal && Priority::Normal < Priority::Low);
    }

    #[test]
    fn unknown_stored_values_are_errors() {
        assert!(Status::from_sql(&Type::TEXT, b"UNKNOWN").is_err());
        assert!(Channel::from_sql(&Type::TEXT, b"FAX").is_err());
        assert!(Priority::from_sql(&Type::INT2, &7i16.to_be_bytes()).is_err());
        assert_eq!(
            Status::from_sql(&Type::TEXT, b"DEAD_LETTERED").ok(),
            Some(Status::DeadLettered)
        );
    }
}
