import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A throw-away certificate authority and the loopback certificate it signed, so the sandbox
/// can serve HTTPS with HTTP/2 as Apple and Google do. Made fresh for each sandbox and never
/// written anywhere but the trust-roots file a test hands to Revoker.
public struct SandboxTLS: Sendable {
    /// The authority's certificate in PEM: what a client adds to its trust roots.
    public let authorityPEM: String
    /// The server's certificate (for `127.0.0.1`, `::1` and `localhost`) and its key.
    let serverCertificate: NIOSSLCertificate
    let serverKey: NIOSSLPrivateKey

    /// A new authority, valid for a day, and a server certificate it signed.
    public init() throws {
        let now = Date()
        let authorityKey = P256.Signing.PrivateKey()
        let authorityName = try DistinguishedName {
            OrganizationName("Revoker sandbox")
            CommonName("Revoker sandbox CA (throw-away)")
        }
        // Valid from five minutes ago (clocks differ a little) for a day.
        func certificate(subject: DistinguishedName, key: P256.Signing.PublicKey, extensions: Certificate.Extensions) throws -> Certificate {
            try Certificate(
                version: .v3,
                serialNumber: .init(),
                publicKey: .init(key),
                notValidBefore: now.addingTimeInterval(-300),
                notValidAfter: now.addingTimeInterval(86_400),
                issuer: authorityName,
                subject: subject,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: extensions,
                issuerPrivateKey: .init(authorityKey)
            )
        }
        let authority = try certificate(
            subject: authorityName,
            key: authorityKey.publicKey,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            }
        )
        let serverKey = P256.Signing.PrivateKey()
        let server = try certificate(
            subject: try DistinguishedName { CommonName("localhost") },
            key: serverKey.publicKey,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([
                    .dnsName("localhost"),
                    .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                    .ipAddress(ASN1OctetString(contentBytes: ArraySlice(repeatElement(0, count: 15) + [1]))),
                ])
            }
        )
        authorityPEM = try Self.pem(authority)
        serverCertificate = try NIOSSLCertificate(bytes: Array(Self.pem(server).utf8), format: .pem)
        self.serverKey = try NIOSSLPrivateKey(bytes: Array(serverKey.pemRepresentation.utf8), format: .pem)
    }

    /// The server side: the sandbox's certificate and key (ALPN is set by the HTTP/2 channel).
    public var serverConfiguration: TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(serverCertificate)], privateKey: .privateKey(serverKey))
    }

    /// The authority as a certificate a client's TLS configuration can trust.
    public func authorityCertificate() throws -> NIOSSLCertificate {
        try NIOSSLCertificate(bytes: Array(authorityPEM.utf8), format: .pem)
    }

    private static func pem(_ certificate: Certificate) throws -> String {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return PEMDocument(type: "CERTIFICATE", derBytes: serializer.serializedBytes).pemString
    }
}
