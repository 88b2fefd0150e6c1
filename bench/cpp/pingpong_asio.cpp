// The asio peer of the network lab's header/body ping-pong (crates/y3-lab/src/net/pingpong.rs).
//
// A message is an 8-byte header {u32 body_size, u32 packet_count} in network order, then
// body_size bytes. Each side reads the header with one async_read, then the body with a
// second async_read (the asio way the evpp-vs-asio report measured), answers with
// packet_count + 1 (the body one byte longer every second message) in one async_write, until
// packet_count reaches the total. One io_context per thread; sessions are dealt round-robin.
//
//   pingpong_asio server THREADS                                   prints "listening IP:PORT"
//   pingpong_asio client IP:PORT THREADS SESSIONS TOTAL [LIMIT_S]  prints "result {json}"
//   pingpong_asio version
//
// The client connects every session first, then times from the first message to the end of
// the last session (the lab's definition of total time). Standalone asio (Debian libasio-dev).

#include <asio.hpp>
#include <asio/version.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using asio::ip::tcp;

namespace {

constexpr std::size_t kHeaderLen = 8;
constexpr std::uint32_t kFirstBody = 100;
constexpr std::uint32_t kMaxBody = 1u << 20;

std::uint32_t load_be32(const unsigned char* p) {
    return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
           std::uint32_t(p[3]);
}

void store_be32(unsigned char* p, std::uint32_t v) {
    p[0] = static_cast<unsigned char>(v >> 24);
    p[1] = static_cast<unsigned char>(v >> 16);
    p[2] = static_cast<unsigned char>(v >> 8);
    p[3] = static_cast<unsigned char>(v);
}

// A pool of io_contexts, one per thread, handed out round-robin.
class Pool {
public:
    explicit Pool(std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) {
            contexts_.push_back(std::make_unique<asio::io_context>(1));
        }
    }
    asio::io_context& next() { return *contexts_[next_++ % contexts_.size()]; }
    asio::io_context& at(std::size_t i) { return *contexts_[i]; }
    std::size_t size() const { return contexts_.size(); }

    // Runs every context on its own thread (the calling thread runs the first) until each
    // runs out of work.
    void run() {
        std::vector<std::thread> threads;
        for (std::size_t i = 1; i < contexts_.size(); ++i) {
            threads.emplace_back([this, i] { contexts_[i]->run(); });
        }
        contexts_[0]->run();
        for (auto& t : threads) t.join();
    }

    // As run(), but keeps the contexts alive with work guards (servers).
    void run_forever() {
        std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
        for (auto& c : contexts_) guards.push_back(asio::make_work_guard(*c));
        run();
    }

private:
    std::vector<std::unique_ptr<asio::io_context>> contexts_;
    std::size_t next_ = 0;
};

struct Results {
    std::atomic<std::size_t> completed{0};
    std::atomic<std::size_t> failed{0};
};

class Session : public std::enable_shared_from_this<Session> {
public:
    Session(tcp::socket socket, std::uint32_t total, bool client, Results* results)
        : socket_(std::move(socket)), total_(total), client_(client), results_(results) {}

    asio::any_io_executor executor() { return socket_.get_executor(); }

    void start() {
        socket_.set_option(tcp::no_delay(true));
        if (client_) {
            send(kFirstBody, 1, false);
        } else {
            read_header();
        }
    }

private:
    void read_header() {
        auto self = shared_from_this();
        asio::async_read(socket_, asio::buffer(header_, kHeaderLen),
                         [this, self](const std::error_code& ec, std::size_t) {
                             if (ec) return finish(false);
                             std::uint32_t size = load_be32(header_);
                             if (size > kMaxBody) return finish(false);
                             body_.resize(size);
                             read_body();
                         });
    }

    void read_body() {
        auto self = shared_from_this();
        asio::async_read(socket_, asio::buffer(body_),
                         [this, self](const std::error_code& ec, std::size_t) {
                             if (ec) return finish(false);
                             on_message(load_be32(header_), load_be32(header_ + 4));
                         });
    }

    // The protocol (the same as the Rust `reply`).
    void on_message(std::uint32_t body_size, std::uint32_t count) {
        last_ = count;
        if (count >= total_) return finish(true);
        std::uint32_t next = count + 1;
        std::uint32_t next_body = body_size + (count % 2 == 0 ? 1 : 0);
        send(next_body, next, next == total_);
    }

    void send(std::uint32_t body_size, std::uint32_t count, bool last) {
        out_.resize(kHeaderLen + body_size, 'p');
        store_be32(reinterpret_cast<unsigned char*>(out_.data()), body_size);
        store_be32(reinterpret_cast<unsigned char*>(out_.data()) + 4, count);
        auto self = shared_from_this();
        asio::async_write(socket_, asio::buffer(out_),
                          [this, self, count, last](const std::error_code& ec, std::size_t) {
                              if (ec) return finish(false);
                              if (last) {
                                  last_ = count;
                                  if (client_) return finish(true);
                              }
                              read_header();
                          });
    }

    void finish(bool ok) {
        if (client_ && results_ != nullptr) {
            if (ok && last_ == total_) {
                results_->completed.fetch_add(1);
            } else {
                results_->failed.fetch_add(1);
            }
            results_ = nullptr;
        }
        std::error_code ignored;
        socket_.shutdown(tcp::socket::shutdown_both, ignored);
        socket_.close(ignored);
    }

    tcp::socket socket_;
    std::uint32_t total_;
    bool client_;
    Results* results_;
    std::uint32_t last_ = 0;
    unsigned char header_[kHeaderLen] = {};
    std::vector<char> body_;
    std::vector<char> out_;
};

void accept_loop(tcp::acceptor& acceptor, Pool& pool) {
    acceptor.async_accept(pool.next(), [&acceptor, &pool](const std::error_code& ec, tcp::socket s) {
        if (!ec) {
            std::make_shared<Session>(std::move(s), UINT32_MAX, false, nullptr)->start();
        }
        accept_loop(acceptor, pool);
    });
}

int server(std::size_t threads) {
    Pool pool(threads);
    tcp::acceptor acceptor(pool.at(0));
    tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
    acceptor.open(ep.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(ep);
    acceptor.listen(8192);
    auto local = acceptor.local_endpoint();
    std::printf("listening %s:%u\n", local.address().to_string().c_str(), unsigned(local.port()));
    std::fflush(stdout);
    // Exit when the lab closes our stdin (or dies).
    std::thread([] {
        char buf[64];
        while (std::fread(buf, 1, sizeof buf, stdin) > 0) {
        }
        std::_Exit(0);
    }).detach();
    accept_loop(acceptor, pool);
    pool.run_forever();
    return 0;
}

int client(const std::string& addr, std::size_t threads, std::size_t sessions, std::uint32_t total,
           unsigned limit_s) {
    auto colon = addr.rfind(':');
    if (colon == std::string::npos) {
        std::fprintf(stderr, "address must be IP:PORT\n");
        return 2;
    }
    tcp::endpoint ep(asio::ip::make_address(addr.substr(0, colon)),
                     static_cast<unsigned short>(std::stoi(addr.substr(colon + 1))));
    std::thread([limit_s] {
        std::this_thread::sleep_for(std::chrono::seconds(limit_s) + std::chrono::seconds(60));
        std::fprintf(stderr, "time limit reached\n");
        std::_Exit(3);
    }).detach();
    Pool pool(threads);
    Results results;
    std::vector<std::shared_ptr<Session>> all;
    all.reserve(sessions);
    for (std::size_t i = 0; i < sessions; ++i) {
        tcp::socket s(pool.next());
        s.connect(ep);
        all.push_back(std::make_shared<Session>(std::move(s), total, true, &results));
    }
    auto start = std::chrono::steady_clock::now();
    for (auto& s : all) {
        asio::post(s->executor(), [s] { s->start(); });
    }
    all.clear();
    pool.run();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (results.completed.load() != sessions) {
        std::fprintf(stderr, "%zu of %zu sessions completed (%zu failed)\n", results.completed.load(),
                     sessions, results.failed.load());
        return 1;
    }
    std::printf("result {\"seconds\":%.6f,\"sessions\":%zu,\"messages\":%llu}\n", seconds, sessions,
                static_cast<unsigned long long>(sessions) * total);
    std::fflush(stdout);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    try {
        if (mode == "version") {
            std::printf("asio %d.%d.%d (standalone), g++ %d.%d\n", ASIO_VERSION / 100000,
                        ASIO_VERSION / 100 % 1000, ASIO_VERSION % 100, __GNUC__, __GNUC_MINOR__);
            return 0;
        }
        if (mode == "server" && argc >= 3) {
            return server(std::max(1, std::atoi(argv[2])));
        }
        if (mode == "client" && argc >= 6) {
            unsigned limit = argc >= 7 ? static_cast<unsigned>(std::atoi(argv[6])) : 300;
            return client(argv[2], std::max(1, std::atoi(argv[3])), std::strtoul(argv[4], nullptr, 10),
                          static_cast<std::uint32_t>(std::strtoul(argv[5], nullptr, 10)), limit);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr,
                 "usage: pingpong_asio server THREADS | client IP:PORT THREADS SESSIONS TOTAL [LIMIT_S] | "
                 "version\n");
    return 2;
}
