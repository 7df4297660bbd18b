package redis

// Subscribe is the backend's subscription to its wake-ups, for tests of
// how it meets a server that does not answer.
var Subscribe = (*Backend).subscribe
