/// One app as Apple knows it: the identifiers that go into its client secrets and its key.
public struct AppleApp: Sendable, CustomStringConvertible {
    /// The bundle id or Services ID the grants were issued to (the JWT `sub` and the `client_id`).
    public let clientID: String
    /// The developer team (the JWT `iss`).
    public let teamID: String
    /// The key's identifier (the JWT header `kid`).
    public let keyID: String
    /// The private key matching ``keyID``.
    public let signingKey: AppleSigningKey

    /// Validates the identifiers' shapes; Apple's Team IDs and Key IDs are ten upper-case letters or digits.
    public init(clientID: String, teamID: String, keyID: String, signingKey: AppleSigningKey) throws(AppleSignInError) {
        guard Self.isAppleIdentifier(teamID) else {
            throw AppleSignInError(
                .invalidTeamID,
                "The Team ID '\(teamID.prefix(32))' for \(clientID.prefix(200)) is not ten upper-case letters or digits."
            )
        }
        guard Self.isAppleIdentifier(keyID) else {
            throw AppleSignInError(
                .invalidKeyID,
                "The Key ID '\(keyID.prefix(32))' for \(clientID.prefix(200)) is not ten upper-case letters or digits."
            )
        }
        guard Self.isValidClientID(clientID) else {
            throw AppleSignInError(.invalidClientID, "The client_id '\(clientID.prefix(200))' is empty, too long or contains whitespace.")
        }
        self.clientID = clientID
        self.teamID = teamID
        self.keyID = keyID
        self.signingKey = signingKey
    }

    public var description: String { "AppleApp(clientID: \(clientID), teamID: \(teamID), keyID: \(keyID))" }

    static func isAppleIdentifier(_ value: String) -> Bool {
        value.utf8.count == 10
            && value.utf8.allSatisfy { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    /// Bundle ids and Services IDs: printable ASCII without spaces, at most 255 bytes.
    public static func isValidClientID(_ value: String) -> Bool {
        !value.isEmpty && value.utf8.count <= 255 && value.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}
