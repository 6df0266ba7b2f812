import Crypto
import Foundation

/// Seals and opens credentials with AES-256-GCM.
///
/// The additional authenticated data binds a sealed value to its request id and credential
/// kind, so it cannot be copied onto another row or relabelled as another kind.
public struct CredentialSealer: Sendable {
    static let formatVersion: UInt8 = 1

    /// The keyring used.
    public let keyring: CredentialKeyring
    /// The intake keys: the last is published for `revoker.enqueue_revocation` to encrypt to;
    /// all of them open what it wrote.
    public let intakeKeys: [IntakeKey]

    /// Creates a sealer.
    public init(keyring: CredentialKeyring, intakeKeys: [IntakeKey] = []) {
        self.keyring = keyring
        self.intakeKeys = intakeKeys
    }

    /// Opens a credential `revoker.enqueue_revocation` encrypted to intake key `keyID`.
    public func openIntake(_ message: [UInt8], keyID: String, kind: CredentialKind) throws(RevokerStoreError) -> Credential {
        guard let key = intakeKeys.first(where: { $0.id == keyID }) else {
            throw RevokerStoreError(
                .unknownKeyID,
                "the intake credential is encrypted to intake key '\(CredentialKeyring.printable(keyID))', which is not configured"
            )
        }
        do {
            guard let secret = String(validating: try key.open(message), as: UTF8.self) else {
                throw RevokerStoreError(.unsealFailed, "the opened intake credential is not UTF-8")
            }
            return Credential(kind: kind, secret: secret)
        } catch let error as RevokerStoreError {
            throw error
        } catch {
            throw RevokerStoreError(.unsealFailed, "the intake credential could not be opened (\(error))")
        }
    }

    /// Seals `credential` for request `requestID` with the current key.
    public func seal(_ credential: Credential, requestID: UUID) throws(RevokerStoreError) -> SealedCredential {
        try seal(credential, owner: .request(requestID))
    }

    /// Seals a held grant's token with the current key, bound to the grant.
    public func seal(_ credential: Credential, grantID: UUID) throws(RevokerStoreError) -> SealedCredential {
        try seal(credential, owner: .grant(grantID))
    }

    /// Opens a held grant's sealed token.
    public func open(_ sealed: SealedCredential, grantID: UUID, kind: CredentialKind) throws(RevokerStoreError) -> Credential {
        try open(sealed, owner: .grant(grantID), kind: kind)
    }

    /// Opens a sealed credential of request `requestID` and the given kind.
    public func open(_ sealed: SealedCredential, requestID: UUID, kind: CredentialKind) throws(RevokerStoreError) -> Credential {
        try open(sealed, owner: .request(requestID), kind: kind)
    }

    /// The row a sealed value belongs to: a request's credential, or a held grant's token. Each
    /// binds its own label, so a value cannot move between the two tables either.
    enum Owner {
        case request(UUID)
        case grant(UUID)

        var label: String {
            switch self {
            case .request(let id): "revoker.credential.v1|\(id.uuidString.lowercased())"
            case .grant(let id): "revoker.grant.v1|\(id.uuidString.lowercased())"
            }
        }
    }

    func seal(_ credential: Credential, owner: Owner) throws(RevokerStoreError) -> SealedCredential {
        let keyID = self.keyring.currentKeyID
        guard let key = self.keyring.keys[keyID] else {
            throw RevokerStoreError(.unknownKeyID, "the current key id is not in the keyring")
        }
        do {
            let box = try AES.GCM.seal(
                Array(credential.secret.utf8),
                using: key,
                authenticating: Self.aad(owner, kind: credential.kind, keyID: keyID)
            )
            guard let combined = box.combined else {
                throw RevokerStoreError(.sealFailed, "AES-GCM produced no combined representation")
            }
            return SealedCredential(keyID: keyID, bytes: [Self.formatVersion] + Array(combined))
        } catch let error as RevokerStoreError {
            throw error
        } catch {
            throw RevokerStoreError(.sealFailed, "the credential could not be sealed")
        }
    }

    func open(_ sealed: SealedCredential, owner: Owner, kind: CredentialKind) throws(RevokerStoreError) -> Credential {
        guard let key = self.keyring.keys[sealed.keyID] else {
            throw RevokerStoreError(
                .unknownKeyID,
                "the credential is sealed with key id '\(CredentialKeyring.printable(sealed.keyID))', which the keyring does not hold"
            )
        }
        guard sealed.bytes.count > 1 + 12 + 16, sealed.bytes[0] == Self.formatVersion else {
            throw RevokerStoreError(.unsealFailed, "the sealed credential has an unknown format")
        }
        do {
            let box = try AES.GCM.SealedBox(combined: sealed.bytes.dropFirst())
            let plain = try AES.GCM.open(
                box,
                using: key,
                authenticating: Self.aad(owner, kind: kind, keyID: sealed.keyID)
            )
            guard let secret = String(bytes: plain, encoding: .utf8) else {
                throw RevokerStoreError(.unsealFailed, "the opened credential is not UTF-8")
            }
            return Credential(kind: kind, secret: secret)
        } catch let error as RevokerStoreError {
            throw error
        } catch {
            throw RevokerStoreError(
                .unsealFailed,
                "the sealed credential could not be opened: wrong key, tampered ciphertext, or sealed for another request or grant"
            )
        }
    }

    static func aad(_ owner: Owner, kind: CredentialKind, keyID: String) -> [UInt8] {
        Array("\(owner.label)|\(kind.rawValue)|\(keyID)".utf8)
    }
}
