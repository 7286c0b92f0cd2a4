/* feed.h - the feed room's public face: the feed decided once for a
 * backend (feed_plan.h) and the batch sources built with it, whose batches
 * the model takes through one call (batch_source.h, with batch_upload.h's
 * tagged input). */
#ifndef TB_FEED_H
#define TB_FEED_H

#include "src/feed/batch_source.h"
#include "src/feed/batch_upload.h"
#include "src/feed/feed_plan.h"

#endif
