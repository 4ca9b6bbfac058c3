// The service manager's readiness protocol (sd_notify(3)): `Type=notify` in
// deploy/systemd/sluice.service makes systemd wait for READY=1 before it counts sluice as started
// (and before units ordered after it start), and STOPPING=1 tells it the drain has begun. Each call
// is a no-op when NOTIFY_SOCKET is unset, i.e. whenever sluice is not run by systemd.
#pragma once

#include <string_view>

namespace sluice::app::systemd {

/// READY=1, with STATUS= when `status` is not empty: the listeners are bound and serving.
void NotifyReady(std::string_view status = {});

/// STOPPING=1: the drain has started; systemd shows the unit as deactivating.
void NotifyStopping(std::string_view status = {});

/// RELOADING=1 (with MONOTONIC_USEC=, which systemd 253's Type=notify-reload requires): a reload
/// of the configuration has started. Follow it with NotifyReloaded() once the new settings are in
/// force (or refused), or systemd shows the unit as reloading until its timeout.
void NotifyReloading(std::string_view status = {});

/// READY=1 after a reload, with STATUS= saying how it went.
void NotifyReloaded(std::string_view status = {});

/// STATUS= alone: the one line `systemctl status sluice` shows.
void NotifyStatus(std::string_view status);

}  // namespace sluice::app::systemd
