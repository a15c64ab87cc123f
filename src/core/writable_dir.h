// Start-up checks of output directories: a run that writes its results only later (a
// checkpoint, the exported weights at the end) must find out at the start that it cannot.
#pragma once

#include <string>

namespace gdn {

// Creates dir (and its parents) when missing, then writes and removes a probe file: the
// directory may exist and still refuse writes (permissions, a read-only or full file
// system). Errors name `what` ("checkpoint directory"), the directory and the OS's reason.
void require_writable_dir(const std::string& dir, const std::string& what);

}  // namespace gdn
