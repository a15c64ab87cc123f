// --device auto|cpu|cuda, shared by the apps. auto means cuda when this build has the
// CUDA path and a GPU is visible, else cpu; asking for cuda where that is impossible is
// an error that says why.
#pragma once

#include <string>

namespace gdn::app {

enum class Device { cpu, cuda };

Device resolve_device(const std::string& flag);
const char* device_name(Device d);

}  // namespace gdn::app
