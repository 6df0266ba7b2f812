import ArgumentParser
import Foundation
import RevokerEvidence
import RevokerStore
import RevokerWebhooks

struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract:
            "Print a new credential sealing key entry (keyID=base64) for REVOKER_SEALING_KEYS_FILE, with --intake an intake key, with --webhook a webhook secret, with --audit an audit signing key.",
        discussion: """
            Credentials are sealed at rest with AES-256-GCM under the keys listed in REVOKER_SEALING_KEYS_FILE, one \
            keyID=base64 line each. The last line is the current key: new credentials are sealed with it, and older \
            keys keep opening what they sealed. To rotate, append a new line and restart the workers; remove an old \
            line only once no stored credential uses it.

            With --intake it prints an RSA private key (PEM) for REVOKER_INTAKE_KEYS_FILE instead: \
            revoker.enqueue_revocation encrypts credentials to the public half of the file's last key, so the \
            database never holds them in plaintext. Rotate the same way: append, restart, remove old keys once no \
            intake row uses them.

            With --webhook it prints a webhook endpoint's signing secret (whsec_ and base64, the Standard \
            Webhooks form) for the file a "webhooks" entry's secret_file names; give the receiver the same file.

            With --audit it prints an Ed25519 private key (PEM) for "audit.signing_key_file": it signs the audit \
            trail's checkpoints and receipts. Keep it outside the database; `revoker audit public-key` prints the \
            half auditors verify with. To rotate, list the old public key under "audit.public_key_files".

            Example:
              umask 077; revoker keygen >> /etc/revoker/sealing-keys
              revoker keygen --key-id 2026-q3 >> /etc/revoker/sealing-keys
              umask 077; revoker keygen --intake >> /etc/revoker/intake-keys.pem
              umask 077; revoker keygen --webhook > /etc/revoker/notes-webhook-secret
              umask 077; revoker keygen --audit > /etc/revoker/audit-signing-key.pem
            """
    )

    @Option(
        name: .customLong("key-id"),
        help: ArgumentHelp("The key's id: 1-64 of A-Z a-z 0-9 . _ - (default: k and today's UTC date, e.g. k20260131).", valueName: "id")
    )
    var keyID: String?

    @Flag(help: "Print an intake key (RSA, PEM) for the SQL enqueue path instead.")
    var intake = false

    @Flag(help: "Print a webhook signing secret (whsec_…) instead.")
    var webhook = false

    @Flag(help: "Print an audit signing key (Ed25519, PEM) instead.")
    var audit = false

    func validate() throws {
        if [intake, webhook, audit].filter({ $0 }).count > 1 { throw ValidationError("Give one of --intake, --webhook and --audit.") }
    }

    func run() throws {
        if audit {
            let key = AuditSigningKey()
            FileHandle.standardError.write(
                Data(
                    "revoker: write this key (id \(key.publicKey.keyID)) to the file audit.signing_key_file names, readable by Revoker only; publish `revoker audit public-key`.\n"
                        .utf8
                )
            )
            print(key.pemRepresentation)
            return
        }
        if webhook {
            FileHandle.standardError.write(
                Data("revoker: write this secret to the file the webhook's secret_file names, readable by Revoker and the receiver only.\n".utf8)
            )
            print(WebhookSecret.generate())
            return
        }
        if intake {
            let key: IntakeKey
            do {
                key = try IntakeKey.generate()
            } catch {
                throw fail("Cannot make an intake key: \(error).")
            }
            FileHandle.standardError.write(
                Data(
                    "revoker: append this key (id \(key.id)) to the REVOKER_INTAKE_KEYS_FILE (newest last: the last key is published for the SQL path; keep older keys until no intake row uses them).\n"
                        .utf8
                )
            )
            print(key.pemRepresentation)
            return
        }
        let id = keyID ?? Self.defaultKeyID()
        let entry: String
        do {
            entry = try CredentialKeyring.generateEntry(keyID: id)
        } catch {
            throw fail("Cannot make a key: \(error.message).")
        }
        FileHandle.standardError.write(
            Data(
                "revoker: append this line to the REVOKER_SEALING_KEYS_FILE (newest last: the last line becomes the current sealing key; keep older lines to open what they sealed).\n"
                    .utf8
            )
        )
        print(entry)
    }

    static func defaultKeyID(now: Date = Date()) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month, .day], from: now)
        return String(format: "k%04d%02d%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }
}
