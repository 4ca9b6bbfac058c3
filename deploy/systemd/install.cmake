# Installs the service's files for `make install` and debian/rules (CMakeLists.txt sets the
# SLUICE_* variables before it runs). It runs at install time, so the paths follow the prefix given
# then (cmake --install --prefix P, DESTDIR=...), not only the one of the configure step.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  # Debian 12 keeps units in /lib/systemd/system (the move to /usr/lib came after bookworm).
  set(etc_dir "/etc")
  set(unit_dir "/lib/systemd/system")
  set(sysusers_dir "/usr/lib/sysusers.d")
  set(tmpfiles_dir "/usr/lib/tmpfiles.d")
else()
  set(etc_dir "${CMAKE_INSTALL_PREFIX}/etc")
  set(unit_dir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
  set(sysusers_dir "${CMAKE_INSTALL_PREFIX}/lib/sysusers.d")
  set(tmpfiles_dir "${CMAKE_INSTALL_PREFIX}/lib/tmpfiles.d")
endif()
set(bin_path "${CMAKE_INSTALL_PREFIX}/${SLUICE_INSTALL_BINDIR}/sluice")
set(staging "${SLUICE_BINARY_DIR}/install-staging")

# The unit names /usr/bin/sluice and /etc/sluice/sluice.toml, as the Debian package installs them.
file(READ "${SLUICE_SOURCE_DIR}/deploy/systemd/sluice.service" unit)
string(REPLACE "/usr/bin/sluice" "${bin_path}" unit "${unit}")
string(REPLACE "/etc/sluice/" "${etc_dir}/sluice/" unit "${unit}")
file(MAKE_DIRECTORY "${staging}")
file(WRITE "${staging}/sluice.service" "${unit}")
file(INSTALL "${staging}/sluice.service" DESTINATION "${unit_dir}"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

# The configuration is the operator's once installed: a second `make install` leaves an edited
# one alone (the example beside the docs is always the current one). A package build stages into
# an empty DESTDIR, so it always gets it.
if(EXISTS "$ENV{DESTDIR}${etc_dir}/sluice/sluice.toml")
  message(STATUS "Kept: $ENV{DESTDIR}${etc_dir}/sluice/sluice.toml (the current example is in "
                 "the docs' examples/)")
else()
  file(INSTALL "${SLUICE_BINARY_DIR}/sluice.toml" DESTINATION "${etc_dir}/sluice"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endif()

if(SLUICE_INSTALL_SYSUSERS)
  # systemd-sysusers and systemd-tmpfiles --create read these (make install prints how).
  configure_file("${SLUICE_SOURCE_DIR}/deploy/systemd/sluice.sysusers" "${staging}/sluice.conf"
                 COPYONLY)
  file(INSTALL "${staging}/sluice.conf" DESTINATION "${sysusers_dir}")
  configure_file("${SLUICE_SOURCE_DIR}/deploy/systemd/sluice.tmpfiles"
                 "${staging}/tmpfiles/sluice.conf" COPYONLY)
  file(INSTALL "${staging}/tmpfiles/sluice.conf" DESTINATION "${tmpfiles_dir}")
  if(NOT DEFINED ENV{DESTDIR} OR "$ENV{DESTDIR}" STREQUAL "")
    message(STATUS "Next, as root: systemd-sysusers; systemd-tmpfiles --create; "
                   "systemctl daemon-reload; systemctl enable --now sluice")
  endif()
endif()
