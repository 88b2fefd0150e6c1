//! What a QoS 1 publish is answered, the one home of the mapping from the router's verdict
//! to MQTT 5's PUBACK reason code (MQTT 3.1.1's PUBACK has no code: it is sent all the
//! same, and only an MQTT 5 client hears the reason).
//!
//! ```text
//!  router's verdict (Stored)       PUBACK (MQTT 5)                 pubacked_total{reason}
//!  stored                          0x00 success                    stored
//!  refused: no_subscriber          0x10 no matching subscribers    no_subscriber
//!  refused: too_long,              0x83 implementation specific    refused_by_router
//!           metadata_too_large          error (a limit of the router)
//!  refused: hop_limit, loop,       0x80 unspecified error          refused_by_router
//!           not_stored, ...             (MQTT 3.1.1, with no code: not_stored closes the
//!                                        connection instead, the publish unacknowledged)
//!  the connection's own checks:
//!  unmapped topic                  0x90 topic name invalid         (publish_refused_total)
//!  not permitted by the token      0x87 not authorized             (publish_refused_total)
//! ```
//!
//! `0x10` is a success code: the publish was valid and handled, nobody subscribed (as
//! Mosquitto answers it); a device that treats `0x80` as a failure would send it again.

use y3_transport::frame::RefusedReason;

use super::error::MqttError;

/// An MQTT 5 PUBACK reason code the router sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PubAckCode {
    /// `0x00`: the router routed (stored) it.
    Success,
    /// `0x10`: handled, and nobody subscribes to it (not an error).
    NoMatchingSubscribers,
    /// `0x80`: refused by the router, for a reason MQTT has no code for.
    UnspecifiedError,
    /// `0x83`: valid, and over one of the router's limits.
    ImplementationSpecificError,
    /// `0x87`: the client's token may not publish its tag.
    NotAuthorized,
    /// `0x90`: its topic is mapped to no tag.
    TopicNameInvalid,
}

impl PubAckCode {
    /// The answer to a publish the router handled: stored (`None`), or refused for
    /// `reason`.
    pub fn of_verdict(refused: Option<RefusedReason>) -> PubAckCode {
        match refused {
            None => PubAckCode::Success,
            Some(RefusedReason::NoSubscriber) => PubAckCode::NoMatchingSubscribers,
            Some(RefusedReason::TooLong | RefusedReason::MetadataTooLarge) => {
                PubAckCode::ImplementationSpecificError
            }
            Some(_) => PubAckCode::UnspecifiedError,
        }
    }

    /// The answer to a publish the connection refused before routing it (MQTT 5, QoS 1),
    /// `None` for an error that closes the connection instead.
    pub fn of_refusal(error: &MqttError) -> Option<PubAckCode> {
        match error {
            MqttError::Unmapped(_) => Some(PubAckCode::TopicNameInvalid),
            MqttError::NotAuthorized(_) => Some(PubAckCode::NotAuthorized),
            _ => None,
        }
    }

    /// The byte on the wire.
    pub const fn byte(self) -> u8 {
        match self {
            PubAckCode::Success => 0x00,
            PubAckCode::NoMatchingSubscribers => 0x10,
            PubAckCode::UnspecifiedError => 0x80,
            PubAckCode::ImplementationSpecificError => 0x83,
            PubAckCode::NotAuthorized => 0x87,
            PubAckCode::TopicNameInvalid => 0x90,
        }
    }

    /// The `reason` label of `y3_router_mqtt_pubacked_total` for a publish the router
    /// handled and answered with this code.
    pub const fn outcome(self) -> &'static str {
        match self {
            PubAckCode::Success => "stored",
            PubAckCode::NoMatchingSubscribers => "no_subscriber",
            _ => "refused_by_router",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_subscriber_is_a_success_and_limits_are_refusals() {
        let of = |r| PubAckCode::of_verdict(Some(r)).byte();
        assert_eq!(PubAckCode::of_verdict(None).byte(), 0);
        assert_eq!(of(RefusedReason::NoSubscriber), 0x10);
        assert_eq!(of(RefusedReason::MetadataTooLarge), 0x83);
        assert_eq!(of(RefusedReason::TooLong), 0x83);
        assert_eq!(of(RefusedReason::Loop), 0x80);
        assert_eq!(of(RefusedReason::HopLimit), 0x80);
        assert_eq!(of(RefusedReason::NotStored), 0x80);
        assert_eq!(of(RefusedReason::Other(42)), 0x80);
        // Below 0x80 a code is a success (MQTT 5, 2.4): only the no-subscriber one is.
        for r in [
            RefusedReason::TooLong,
            RefusedReason::HopLimit,
            RefusedReason::Loop,
            RefusedReason::MetadataTooLarge,
            RefusedReason::NotStored,
        ] {
            assert!(of(r) >= 0x80, "{r}");
        }
        assert_eq!(
            PubAckCode::NoMatchingSubscribers.outcome(),
            RefusedReason::NoSubscriber.kind()
        );
        let unmapped = MqttError::Unmapped("a".into());
        assert_eq!(
            PubAckCode::of_refusal(&unmapped).map(PubAckCode::byte),
            Some(0x90)
        );
        let forbidden = MqttError::NotAuthorized("a".into());
        assert_eq!(
            PubAckCode::of_refusal(&forbidden).map(PubAckCode::byte),
            Some(0x87)
        );
        assert_eq!(PubAckCode::of_refusal(&MqttError::KeepAlive), None);
    }
}
