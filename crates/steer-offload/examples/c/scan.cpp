// The C example through the RAII wrappers: entries are freed when the last handle goes.
#include <cstdio>
#include <cstring>
#include <vector>

#include "steer_offload.hpp"

int main() {
    steer::Cache cache(nullptr, "local", "cpu");
    std::vector<unsigned char> block(256 * 1024);
    for (std::size_t i = 0; i < block.size(); i++) block[i] = static_cast<unsigned char>(i ^ 0x5a);
    {
        steer::CacheData data = cache.access(block.data(), block.size());
        steer::CacheData shared = data;  // another consumer of the same entry
        shared.wait();
        if (std::memcmp(data.location(), block.data(), block.size()) != 0) return 1;
        std::printf("C++: %zu bytes cached by %s, cached=%d\n", block.size(), cache.backend(), data.is_cached());
    }
    try {
        cache.access(nullptr, 64);
        return 1;
    } catch (const steer::OffloadError& e) {
        std::printf("C++: null block refused: %s\n", e.what());
    }
    cache.invalidate(block.data());
    return 0;
}
