import Hummingbird
import NIOCore

extension Request {
    /// The body's bytes, at most `limit`; `tooLarge` when there are more (each caller answers
    /// an oversized body in its own way).
    func bodyBytes(upTo limit: Int, tooLarge: @autoclosure () -> APIProblem) async throws -> [UInt8] {
        do {
            return Array(try await body.collect(upTo: limit).readableBytesView)
        } catch is NIOTooManyBytesError {
            throw tooLarge()
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw tooLarge()
        }
    }
}
