// RAII wrappers of the steer-offload C API (steer_offload.h) for C++17.
#ifndef STEER_OFFLOAD_HPP
#define STEER_OFFLOAD_HPP

#include <cstddef>
#include <stdexcept>
#include <utility>

#include "steer_offload.h"

namespace steer {

/// Thrown where the C API reports an error; what() is its one-line message.
struct OffloadError : std::runtime_error {
    OffloadError() : std::runtime_error(steer_last_error()) {}
};

/// A holder's handle on a cache entry: copies share the entry; the last one frees it.
class CacheData {
  public:
    explicit CacheData(SteerCacheData* raw) : raw_(raw) {
        if (!raw_) throw OffloadError();
    }
    CacheData(const CacheData& other) : raw_(steer_cache_data_clone(other.raw_)) {}
    CacheData(CacheData&& other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
    CacheData& operator=(CacheData other) noexcept {
        std::swap(raw_, other.raw_);
        return *this;
    }
    ~CacheData() { steer_cache_data_free(raw_); }

    /// Sleeps until the copy has completed.
    void wait() const { steer_cache_data_wait(raw_); }
    /// The cached bytes (after waiting), or the source if the copy failed.
    const void* location() const { return steer_cache_data_location(raw_); }
    bool is_cached() const { return steer_cache_data_is_cached(raw_) != 0; }

  private:
    SteerCacheData* raw_;
};

/// An offloading cache of this machine; nullptr names take the defaults.
class Cache {
  public:
    explicit Cache(const char* placement = nullptr, const char* copy_policy = nullptr, const char* backend = nullptr)
        : raw_(steer_cache_new(placement, copy_policy, backend)) {
        if (!raw_) throw OffloadError();
    }
    Cache(const Cache&) = delete;
    Cache& operator=(const Cache&) = delete;
    Cache(Cache&& other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
    ~Cache() { steer_cache_free(raw_); }

    /// The entry for `len` bytes at `src` (see steer_cache_access for the contract on `src`).
    CacheData access(const void* src, std::size_t len) const { return CacheData(steer_cache_access(raw_, src, len)); }
    /// Unused entries of `node` (-1: every node) are dropped.
    void flush(int node = -1) const {
        if (steer_cache_flush(raw_, node) != 0) throw OffloadError();
    }
    void clear() const { steer_cache_clear(raw_); }
    void invalidate(const void* src) const { steer_cache_invalidate(raw_, src); }
    const char* backend() const { return steer_cache_backend(raw_); }

  private:
    SteerCache* raw_;
};

}  // namespace steer

#endif
