import Crypto
import Foundation

/// What kind of credential a request holds.
public struct CredentialKind: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init?(rawValue: String) {
        guard Self.all.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }
    private init(_ rawValue: String) { self.rawValue = rawValue }

    /// A single-use authorization code (Apple's is valid for five minutes).
    public static let authorizationCode = Self("authorization_code")
    /// A refresh token.
    public static let refreshToken = Self("refresh_token")
    /// An access token.
    public static let accessToken = Self("access_token")
    /// An identity token that is itself the grant: a provider that issues no other token for a
    /// sign-in ends the grant with it.
    public static let identityToken = Self("identity_token")
    /// All kinds.
    public static let all: [CredentialKind] = [.authorizationCode, .refreshToken, .accessToken, .identityToken]

    public var description: String { self.rawValue }
}
