/* Starling: the one header an embedder includes. It brings in every public
 * header of include/starling/ (the library's API, sl_ and SL_ names) and
 * says which release it is.
 *
 *   #include <starling/starling.h>
 *   cc app.c $(pkg-config --cflags --libs --static starling)
 *
 * docs/embedding.md says how to install the library (cmake --install) and
 * link against it. Internal headers (beside their code in src/) and test
 * switches are not part of it.
 *
 * The version lives here and nowhere else: the top CMakeLists.txt reads
 * these three lines for project(VERSION), the peers' and peerctl's
 * --version (SL_VERSION) and the pkg-config file. */
#ifndef STARLING_STARLING_H
#define STARLING_STARLING_H

#define STARLING_VERSION_MAJOR 0
#define STARLING_VERSION_MINOR 1
#define STARLING_VERSION_PATCH 0

#define STARLING_VERSION_STR_(x) #x
#define STARLING_VERSION_STR(x) STARLING_VERSION_STR_(x)
/* "MAJOR.MINOR.PATCH" */
#define STARLING_VERSION                            \
    STARLING_VERSION_STR(STARLING_VERSION_MAJOR) "." \
    STARLING_VERSION_STR(STARLING_VERSION_MINOR) "." \
    STARLING_VERSION_STR(STARLING_VERSION_PATCH)
/* One number that orders releases: MAJOR * 10000 + MINOR * 100 + PATCH. */
#define STARLING_VERSION_NUMBER \
    (STARLING_VERSION_MAJOR * 10000 + STARLING_VERSION_MINOR * 100 + STARLING_VERSION_PATCH)

/* errors, logging, allocation; hashes, random numbers, clocks */
#include "starling/common.h"
#include "starling/hash.h"
#include "starling/hlc.h"
#include "starling/rng.h"
/* the wire: canonical msgpack and the messages */
#include "starling/mpack.h"
#include "starling/msg.h"
/* the operating system, the disk and the transport */
#include "starling/addr.h"
#include "starling/disk.h"
#include "starling/net.h"
#include "starling/platform.h"
/* membership and rendezvous choices */
#include "starling/round.h"
#include "starling/swim.h"
/* the peer daemon's loop */
#include "starling/peer.h"
/* the replicated store and blobs */
#include "starling/blob.h"
#include "starling/blob_node.h"
#include "starling/blob_xfer.h"
#include "starling/crdt.h"
#include "starling/store.h"
#include "starling/store_node.h"
#include "starling/store_watch.h"
/* studies (model search) and elastic jobs */
#include "starling/elastic.h"
#include "starling/elastic_node.h"
#include "starling/study.h"
#include "starling/study_node.h"
/* the training engine */
#include "starling/nn.h"
#include "starling/nn_backend.h"
/* the deterministic simulator */
#include "starling/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library linked in (STARLING_VERSION when it was
 * built): differs from the header's STARLING_VERSION when a program is
 * compiled against one release and linked against another. */
const char *sl_version(void);

#ifdef __cplusplus
}
#endif

#endif
