import Foundation
import RevokerEvidence
import RevokerStore

// What the templates show: stored properties only (Mustache reads them by reflection), every
// value already text.

/// The signed-in part of every page's frame (navigation and the sign-out form); nil when
/// nobody is signed in.
struct UIFrame {
    var keyName: String
    var csrf: String

    init(_ visitor: UIVisitor) {
        keyName = visitor.caller.name
        csrf = visitor.session.csrfToken
    }
}

struct UIErrorView {
    var frame: UIFrame?
    var heading: String
    var message: String
}

struct UISignInView {
    var frame: UIFrame?
    var csrf: String
    var notice: String?
    var error: String?
}

struct UISearchView {
    struct Option {
        var value: String
        var selected: Bool
    }

    struct Row {
        var id: String
        var requestedAt: String
        var reference: String
        /// The reference percent-encoded for `/ui/accounts/…`; nil when the request has none.
        var accountPath: String?
        var clientID: String
        var userID: String
        var outcome: String
        var outcomeClass: String
        /// The archive file that holds its audit rows, once archived.
        var archive: String?
    }

    var frame: UIFrame?
    var reference: String
    var userID: String
    var clientID: String
    var from: String
    var to: String
    var outcomes: [Option]
    var query: String
    var error: String?
    var requests: [Row]
    var count: Int
    var one: Bool
    var hasRequests: Bool
    var hasMore: Bool
    var next: String?
}

struct UIRequestView {
    struct Event {
        struct Apple {
            var endpoint: String
            var status: String
            var error: String?
            var latency: String?
        }

        var at: String
        var event: String
        var actor: String
        var apple: Apple?
        var detail: String?
    }

    var frame: UIFrame?
    var id: String
    var outcome: String
    var outcomeClass: String
    var clientID: String
    var reference: String
    var accountPath: String?
    var userID: String
    var requestedAt: String
    var requestedBy: String
    var finishedAt: String
    var receipts: Bool
    var events: [Event]
    var truncated: Bool
    var shown: Int
}

/// An account's page: the grants held for it (never a token) and its deletions.
struct UIAccountView {
    struct Grant {
        var id: String
        var provider: String
        var clientID: String
        var userID: String
        var kind: String
        var state: String
        var stateClass: String
        var endReason: String
        /// When its token was sealed here, or when it was registered.
        var since: String
        var endedAt: String
        var holdRequest: String?
        var revokeRequest: String?
    }

    struct Deletion {
        var id: String
        var requestedAt: String
        var requestedBy: String
        var apps: String
        var state: String
        var outcome: String
        var outcomeClass: String
        var completedAt: String
        var grants: Int
        /// The request of the credential it carried (a grant Revoker never held), if any.
        var credentialRequests: [String]
        /// Whether its signed receipt can be downloaded (completed, and receipts are signed).
        var receipt: Bool
    }

    var frame: UIFrame?
    var reference: String
    var accountPath: String
    var grants: [Grant]
    var grantCount: Int
    var oneGrant: Bool
    var hasGrants: Bool
    var grantsTruncated: Bool
    var deletions: [Deletion]
    var deletionCount: Int
    var oneDeletion: Bool
    var hasDeletions: Bool
    var deletionsTruncated: Bool
}

struct UIStatusView {
    struct Paused {
        var clientID: String
        var reason: String
        var pausedAt: String
        var nextProbeAt: String
    }

    struct Failure {
        var outcome: String
        var count: Int
    }

    var frame: UIFrame?
    var now: String
    var queueDepth: Int
    var oldestDue: String
    var pausedCount: Int
    var paused: [Paused]
    var hasPaused: Bool
    var failures: [Failure]
    var hasFailures: Bool
}

/// How the pages show values.
enum UIFormat {
    /// The CSS class of an outcome: ended well, ended badly, or still open.
    static func outcomeClass(_ outcome: String?) -> String {
        switch outcome {
        case nil: "open"
        case RevocationOutcome.revoked.rawValue?, RevocationOutcome.alreadyInvalid.rawValue?, RevocationOutcome.revokedByUser.rawValue?: "good"
        default: "bad"
        }
    }

    /// The CSS class of a grant's state: ended with nothing left to revoke, never held, or live.
    static func grantStateClass(_ state: GrantState) -> String {
        switch state {
        case .revoked, .dead: "good"
        case .failed: "bad"
        case .pending, .held, .revoking: "open"
        }
    }

    /// The CSS class of a deletion's outcome.
    static func deletionOutcomeClass(_ outcome: AccountDeletion.Outcome?) -> String {
        switch outcome {
        case nil: "open"
        case .revoked?, .nothingHeld?: "good"
        case .incomplete?: "bad"
        }
    }

    /// `text` percent-encoded but for the unreserved characters, so that it is one path segment
    /// (a `/` becomes `%2F`) or one query value, whatever it holds.
    static func percentEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// A time as the pages show it: UTC to the second.
    static func time(_ date: Date?) -> String {
        guard let date else { return "—" }
        return String(WireFormat.timestamp(date).prefix(19)).replacingOccurrences(of: "T", with: " ")
    }

    /// An age in its two largest units: `3 d 4 h`, `12 min 5 s`.
    static func age(_ seconds: Int64) -> String {
        let units: [(Int64, String)] = [(86_400, "d"), (3600, "h"), (60, "min"), (1, "s")]
        var rest = seconds
        var parts: [String] = []
        for (size, name) in units where rest >= size && parts.count < 2 {
            parts.append("\(rest / size) \(name)")
            rest %= size
        }
        return parts.isEmpty ? "0 s" : parts.joined(separator: " ")
    }
}
