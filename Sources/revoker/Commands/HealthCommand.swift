import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Exit 0 when a URL answers 200 (a container health check without curl).",
        discussion: """
            Example:
              revoker health --url http://127.0.0.1:8080/readyz
            """
    )

    @Option(help: "The URL to ask.")
    var url = "http://127.0.0.1:8080/readyz"

    @Option(help: "Seconds to wait for the answer.")
    var timeout: Int64 = 5

    func run() async throws {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let status: Int?
        do {
            status = Int(try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(timeout)).status.code)
        } catch {
            status = nil
        }
        try? await client.shutdown()
        guard status == 200 else {
            throw fail("\(url.prefix(200)) answered \(status.map(String.init) ?? "nothing").")
        }
    }
}
