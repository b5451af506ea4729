package inheritedfd

// fdDir lists this process's open descriptors.
const fdDir = "/proc/self/fd"
