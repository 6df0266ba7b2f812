import ArgumentParser
import Crypto
import Foundation
import RevokerEvidence
import RevokerHTTP

struct APIKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api-key",
        abstract: "Make a new API key: the key once on standard output, its configuration entry on standard error.",
        discussion: """
            Only the SHA-256 of a key is configured (http.api_keys), so the key itself is shown once: hand it \
            to the caller through your secret store. The entry names the caller in the audit trail.

            Example:
              revoker api-key billing-backend --scope revocations:write --scope revocations:read > billing.key
              revoker api-key notes-backend --scope revocations:write --client-id com.example.notes > notes.key

            With --client-id the key acts on and reads only those apps, so one backend's key cannot cancel \
            another app's deletions; give each backend its own.
            """
    )

    @Argument(help: "The caller's name (1-64 of A-Z a-z 0-9 - _ .), the actor in audit events.")
    var name: String

    // Named from the scopes themselves, so that the help lists every one there is.
    @Option(
        name: .customLong("scope"),
        help: ArgumentHelp("One of \(APIScope.allCases.map(\.rawValue).joined(separator: ", ")); repeat for several.")
    )
    var scopes: [String] = []

    @Option(name: .customLong("client-id"), help: "Limit the key to this app; repeat for several (default: every app).")
    var clientIDs: [String] = []

    func validate() throws {
        guard (1...64).contains(name.count), name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }) else {
            throw ValidationError("The name must be 1-64 of A-Z a-z 0-9 - _ .")
        }
        guard !scopes.isEmpty else { throw ValidationError("Give at least one --scope.") }
        for scope in scopes where APIScope(rawValue: scope) == nil {
            throw ValidationError("Unknown scope; known: \(APIScope.allCases.map(\.rawValue).joined(separator: ", ")).")
        }
    }

    func run() throws {
        var bytes = [UInt8](repeating: 0, count: 32)
        var generator = SystemRandomNumberGenerator()
        for index in bytes.indices { bytes[index] = generator.next() }
        let key =
            "rvk_"
            + Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        let digest = SHA256.hash(data: Array(key.utf8)).hex
        var entry: [String: Any] = ["name": name, "sha256": digest, "scopes": scopes]
        if !clientIDs.isEmpty { entry["client_ids"] = clientIDs }
        let json = (try? JSONSerialization.data(withJSONObject: entry, options: [.sortedKeys])).map { String(decoding: $0, as: UTF8.self) } ?? ""
        FileHandle.standardError.write(
            Data("revoker: add this entry to http.api_keys, and give the key (standard output) to the caller:\n\(json)\n".utf8)
        )
        print(key)
    }
}
